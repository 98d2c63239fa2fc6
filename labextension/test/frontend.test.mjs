// Unit tests of the DOM-free front-end modules, run on plain Node against the compiled lib/:
//   node --experimental-detect-module --test test/
// (tests/test_server_frontend.py runs them in the Python suite.)
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { invalidReason, sourceRows } from '../lib/context.js';
import { displayText, escapeControls } from '../lib/escape.js';
import { fileItem, filterDshItems, isDshItem, sessionItem } from '../lib/items.js';
import { fileMention, isDshCell, isTypingEdit, mentionAt } from '../lib/mentions.js';

const CELL = '%%dsh --model m\n';

test('escapeControls shows C0, DEL and C1 controls as \\xNN and keeps the rest', () => {
  assert.equal(escapeControls('a\x1b[31m\n\x07\u009b\x7f\u00a0界'), 'a\\x1b[31m\\x0a\\x07\\x9b\\x7f\u00a0界');
  assert.equal(escapeControls('<img src=x onerror=alert(1)>'), '<img src=x onerror=alert(1)>');
  assert.equal(displayText(null), '');
  assert.equal(displayText(12), '12');
});

test('isDshCell needs the magic on the first line', () => {
  assert.equal(isDshCell('%%dsh\nhi'), true);
  assert.equal(isDshCell('\n  %%dsh --x\nhi'), true);
  assert.equal(isDshCell('%%dshx\nhi'), false);
  assert.equal(isDshCell('print(1)\n%%dsh'), false);
});

test('mentionAt finds the @ token the cursor is in, in the body only', () => {
  const at = (text, offset = text.length) => mentionAt(text, offset);
  assert.deepEqual(at(CELL + 'look at @'), { start: 24, end: 25, query: '', quoted: false });
  assert.deepEqual(at(CELL + 'look at @ana'), { start: 24, end: 28, query: 'ana', quoted: false });
  assert.deepEqual(at(CELL + '(@ana'), { start: 17, end: 21, query: 'ana', quoted: false });
  assert.deepEqual(at(CELL + 'x @"my fi'), { start: 18, end: 25, query: 'my fi', quoted: true });
  // Cursor inside the token: the replacement runs to the token's end.
  assert.deepEqual(at(CELL + '@analysis done', 19), { start: 16, end: 25, query: 'an', quoted: false });
  assert.equal(at('%%dsh @x'), null); // the magic line
  assert.equal(at('print(1) @x'), null); // not a %%dsh cell
  assert.equal(at(CELL + 'mail me@example.org'), null);
  assert.equal(at(CELL + '@ana lysis'), null);
  assert.equal(at(CELL + 'see @[label](dsh-session:IiI)'), null);
  assert.equal(at(CELL + 'x @"done" '), null);
  assert.equal(at(CELL + 'x', -1), null);
});

test('fileMention quotes paths with spaces', () => {
  assert.equal(fileMention('data.csv'), '@data.csv');
  assert.equal(fileMention('sub dir/'), '@"sub dir/"');
  assert.equal(fileMention('a "b".txt'), '@a "b".txt');
});

test('isTypingEdit accepts keystrokes and folder completions only', () => {
  assert.equal(isTypingEdit([{ retain: 5 }, { insert: '@' }]), true);
  assert.equal(isTypingEdit([{ retain: 5 }, { delete: 1 }]), true);
  assert.equal(isTypingEdit([{ retain: 5 }, { delete: 3 }, { insert: 'x' }]), true);
  assert.equal(isTypingEdit([{ retain: 5 }, { insert: '@"sub dir/' }]), true);
  assert.equal(isTypingEdit([{ insert: '@[a](dsh-session:IiI)' }]), false);
  assert.equal(isTypingEdit([{ delete: 4 }]), false);
  assert.equal(isTypingEdit(undefined), false);
});

const candidate = (over = {}) => ({
  sessionId: 's-1', label: 'Quarterly\x1b[0m', cwd: '/w/nb', sameWorkspace: true,
  createdAt: Date.UTC(2026, 7, 1), mention: '@[Quarterly\x1b[0m](dsh-session:InMtMSI)', ...over
});

test('sessionItem escapes for display and inserts the mention with a visible-controls label', () => {
  const item = sessionItem(candidate());
  assert.ok(isDshItem(item));
  assert.equal(item.label, 'Quarterly\\x1b[0m');
  // Same as the Python host: controls made visible, then the mention's own escaping of \\ and ].
  assert.equal(item.insertText, '@[Quarterly\\\\x1b[0m](dsh-session:InMtMSI)');
  const bracketed = sessionItem(candidate({ label: 'a]b\\c', mention: '@[a\\]b\\\\c](dsh-session:InMtMSI)' }));
  assert.equal(bracketed.insertText, '@[a\\]b\\\\c](dsh-session:InMtMSI)');
  assert.equal(item.dsh.detail, 's-1 · /w/nb · 2026-08-01T00:00:00.000Z');
  const plain = sessionItem(candidate({ label: 's-1', cwd: undefined }));
  assert.equal(plain.dsh.detail, '(no cwd) · 2026-08-01T00:00:00.000Z');
  assert.equal(isDshItem({ label: 'x' }), false);
});

test('filterDshItems narrows like the server and keeps sessions before files', () => {
  const items = [
    sessionItem(candidate()),
    sessionItem(candidate({ sessionId: 'other', label: 'Notes', cwd: '/elsewhere' })),
    fileItem({ path: 'data.csv', kind: 'file' }),
    fileItem({ path: 'sub dir/', kind: 'directory' }),
    fileItem({ path: 'sub dir/q.txt', kind: 'file' }),
    { label: 'kernel-thing', insertText: 'kernel-thing' }
  ];
  const labels = typed => filterDshItems(items, typed).map(i => i.label);
  assert.deepEqual(labels('@'), ['Quarterly\\x1b[0m', 'Notes', 'data.csv', 'sub dir/']); // no kernel items
  assert.deepEqual(labels('@QUA'), ['Quarterly\\x1b[0m']);
  assert.deepEqual(labels('@else'), ['Notes']); // by cwd
  assert.deepEqual(labels('@s-1'), ['Quarterly\\x1b[0m']); // by id
  assert.deepEqual(labels('@"sub dir/q'), ['sub dir/q.txt']);
  assert.deepEqual(labels('@dat'), ['data.csv']);
  // Session titles hold spaces: every typed word must match; a plain file name ends at a space.
  assert.deepEqual(labels('@qua rter'), ['Quarterly\\x1b[0m']);
  assert.deepEqual(labels('@QUARTERLY nb '), ['Quarterly\\x1b[0m']);
  assert.deepEqual(labels('@qua zz'), []);
  assert.deepEqual(labels('@data.csv and'), []);
  assert.deepEqual(labels('@qua\nx'), []); // a new line closes the mention
  const copy = filterDshItems(items, '@')[0];
  copy.label = 'changed';
  assert.equal(items[0].label, 'Quarterly\\x1b[0m');
});

test('invalidReason and sourceRows describe the reference-context bundle', () => {
  assert.match(invalidReason(null), /not a JSON object/);
  assert.match(invalidReason({ kind: 'other', references: [] }), /not "session-reference"/);
  assert.match(invalidReason({ kind: 'session-reference' }), /references/);
  assert.match(invalidReason({ kind: 'session-reference', references: [1] }), /reference 0/);
  assert.equal(invalidReason({ kind: 'session-reference', references: [] }), null);
  const rows = Object.fromEntries(sourceRows({
    sessionId: 'id\n1', label: '</referenced-sessions>\x07', capturedThroughSeq: null, compacted: true,
    originalMessages: 12, retainedMessages: 9, omittedMessages: 3, omittedBytes: 40960, truncated: true,
    inputIndex: 0, spillPath: null
  }));
  assert.equal(rows['Label'], '</referenced-sessions>\\x07');
  assert.equal(rows['Session id'], 'id\\x0a1');
  assert.equal(rows['Captured through seq'], 'none (empty log)');
  assert.equal(rows['Format version'], '0');
  assert.equal(rows['Messages retained'], '9 of 12');
  assert.equal(rows['Omitted bytes'], '40,960');
  assert.equal(rows['Full snapshot'], 'not saved');
  assert.equal(rows['Compacted'], 'yes');
});
