// A kernel change merged into what was typed meanwhile (lib/merge.js, the prompt box's view), on plain Node:
//   node --experimental-detect-module --test test/
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { caretAfter, givenBack, mergeEdits, spliceBetween } from '../lib/merge.js';

const MENTION = '@[Regional sales Q3](dsh-session:regional-1) ';

test('a mention picked before the keys typed after it reached the kernel comes first, and no key is lost', () => {
  // The picker inserted into the empty box the kernel knew; "what w" was typed before the update came back.
  const merged = mergeEdits('', MENTION, 'what w');
  assert.equal(merged.text, MENTION + 'what w');
  assert.equal(caretAfter(merged, 'what w'.length), merged.text.length);
  // Picked after "wh" was typed (the kernel had it), and "at w" typed before the update came back: in that order.
  assert.equal(mergeEdits('wh', 'wh ' + MENTION, 'what w').text, 'wh ' + MENTION + 'at w');
});

test('changes in different places are both kept, with the caret moved along', () => {
  const base = 'compare these numbers';
  const theirs = 'compare ' + MENTION + 'these numbers'; // inserted at the caret the kernel knew
  const typed = 'compare these numbers please';
  const merged = mergeEdits(base, theirs, typed);
  assert.equal(merged.text, 'compare ' + MENTION + 'these numbers please');
  assert.equal(caretAfter(merged, typed.length), merged.text.length);
  assert.equal(caretAfter(merged, 3), 3); // a caret before the change stays
  // Typed before the kernel's change: the change moves with the text after the typing.
  const early = mergeEdits(base, theirs, 'please compare these numbers');
  assert.equal(early.text, 'please compare ' + MENTION + 'these numbers');
});

test('the kernel emptying the box after a send keeps what was typed after the text it sent', () => {
  assert.equal(mergeEdits('first prompt', '', 'first prompt and more').text, ' and more');
});

test('a prompt given back into a box typed into meanwhile comes before the new text, on its own line', () => {
  // Without a joiner the two texts meet as they are; the kernel's give-back sends a newline as its joiner.
  assert.equal(mergeEdits('', 'the refused prompt', 'next').text, 'the refused promptnext');
  const merged = mergeEdits('', 'the refused prompt', 'next', '\n');
  assert.equal(merged.text, 'the refused prompt\nnext');
  assert.equal(caretAfter(merged, 'next'.length), merged.text.length); // the caret stays after "next"
  // The kernel knew some of the typed text: its give-back already ends with the newline, none is added.
  assert.equal(mergeEdits('ne', 'the refused prompt\nne', 'next', '\n').text, 'the refused prompt\nnext');
  assert.equal(mergeEdits('ne', 'the refused prompt\nne', 'xne', '\n').text, 'the refused prompt\nxne');
  // Typed text that starts with the joiner, or keys typed elsewhere, get none either.
  assert.equal(mergeEdits('', 'back', '\nnext', '\n').text, 'back\nnext');
  assert.equal(mergeEdits('a', 'back\na', 'ab', '\n').text, 'back\nab');
});

test('a prompt given back by a view goes on its own line above what was typed since', () => {
  assert.equal(givenBack('the refused prompt', 'next'), 'the refused prompt\nnext');
  assert.equal(givenBack('the refused prompt', ''), 'the refused prompt');
});

test('both changing the same words is no merge (the caller keeps what was typed)', () => {
  assert.equal(mergeEdits('one two three', 'one 2 three', 'one zwei three'), null);
  assert.equal(mergeEdits('abc', 'aXc', 'c'), null);
});

test('nothing typed, or the same change on both sides: the kernel\'s text as it is', () => {
  assert.equal(mergeEdits('abc', 'abcd', 'abc').text, 'abcd');
  assert.equal(mergeEdits('abc', 'abcd', 'abcd').text, 'abcd');
  assert.equal(mergeEdits('abc', 'abc', 'abXc').text, 'abXc');
});

test('a range never splits a character written as two UTF-16 units', () => {
  const splice = spliceBetween('a😀b', 'a😃b'); // the two emoji share their first unit
  assert.deepEqual(splice, { start: 1, end: 3, text: '😃' });
  assert.equal(mergeEdits('😀', '😀' + MENTION, '😀 hi').text, '😀' + MENTION + ' hi');
});

/** A small deterministic generator (mulberry32), so a failure repeats. */
function generator(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test('two insertions at any places: both are there, in the order of their places, the kernel\'s first on a tie', () => {
  const random = generator(20261206);
  const letters = Array.from('ab @[x](dsh-session:y) \n😀');
  const word = length => Array.from({ length }, () => letters[Math.floor(random() * letters.length)]).join('');
  for (let run = 0; run < 3000; run += 1) {
    // whole code points only: the base is split between them
    const points = Array.from(word(Math.floor(random() * 12)));
    const base = points.join('');
    const k = Math.floor(random() * (points.length + 1));
    const u = Math.floor(random() * (points.length + 1));
    const mention = 'K' + word(Math.floor(random() * 4)) + 'K';
    const typed = 'T' + word(Math.floor(random() * 4)) + 'T';
    const cut = at => points.slice(0, at).join('');
    const rest = at => points.slice(at).join('');
    const theirs = cut(k) + mention + rest(k);
    const ours = cut(u) + typed + rest(u);
    const merged = mergeEdits(base, theirs, ours);
    const expected =
      k <= u
        ? cut(k) + mention + points.slice(k, u).join('') + typed + rest(u)
        : cut(u) + typed + points.slice(u, k).join('') + mention + rest(k);
    // The ranges found may differ from the ones made where letters repeat, never the text.
    assert.notEqual(merged, null, JSON.stringify({ base, theirs, ours }));
    assert.equal(merged.text, expected, JSON.stringify({ base, theirs, ours }));
    const caret = caretAfter(merged, u + typed.length);
    assert.ok(caret >= 0 && caret <= merged.text.length);
  }
});
