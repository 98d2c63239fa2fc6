// Unit tests of the DOM-free front-end modules, run on plain Node against the compiled lib/:
//   node --experimental-detect-module --test test/
// (tests/test_server_frontend.py runs them in the Python suite.)
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { invalidReason, referenceView } from '../lib/context.js';
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

test('invalidReason checks the shape of the reference-context bundle', () => {
  assert.match(invalidReason(null), /not a JSON object/);
  assert.match(invalidReason({ kind: 'other', references: [] }), /not "session-reference"/);
  assert.match(invalidReason({ kind: 'session-reference' }), /references/);
  assert.match(invalidReason({ kind: 'session-reference', references: [1] }), /reference 0/);
  assert.equal(invalidReason({ kind: 'session-reference', references: [] }), null);
});

// A bundle as the host writes it (dsh_jupyter/notebook/display.py makes the view's words).
const BUNDLE = {
  kind: 'session-reference', form: 'recall', version: 1, targetSessionId: 't',
  references: [{ sessionId: 'sales-4', label: 'Regional sales Q3', capturedThroughSeq: 8, compacted: false,
    originalMessages: 2, retainedMessages: 2, omittedMessages: 0, omittedBytes: 0, truncated: false,
    inputIndex: 0, spillPath: null }],
  view: {
    line: 'Referenced: Regional sales Q3 · 2 messages · complete',
    sources: [{ title: 'Regional sales Q3', state: 'complete', rows: [
      ['Session id', 'sales-4'], ['Captured', '1 Dec 2026, 08:41:02'],
      ['Messages', '2 messages sent to the agent'], ['Left out', 'nothing']] }],
    preview: { heading: 'What the agent received (40 characters)', text: '## Background\n<referenced-sessions>\n[]' }
  }
};

test('referenceView draws the words the host made, rows in order', () => {
  const view = referenceView(BUNDLE);
  assert.equal(view.line, 'Referenced: Regional sales Q3 · 2 messages · complete');
  assert.deepEqual(view.sources, BUNDLE.view.sources);
  assert.deepEqual(view.preview, BUNDLE.view.preview); // line feeds kept in the preview
});

test('referenceView escapes controls again and falls back to the labels for old or broken views', () => {
  const hostile = structuredClone(BUNDLE);
  hostile.view.line = 'Referenced: \x1b[31mred';
  hostile.view.sources[0].rows.push(['Left\x07', 'out\nhere']);
  hostile.view.preview.text = 'a\x1bb\nc\x00';
  const view = referenceView(hostile);
  assert.equal(view.line, 'Referenced: \\x1b[31mred');
  assert.deepEqual(view.sources[0].rows.at(-1), ['Left\\x07', 'out\\x0ahere']);
  assert.equal(view.preview.text, 'a\\x1bb\nc\\x00');
  // A bundle saved before the view existed, or a view that is not well formed: a line of labels.
  const old = { ...BUNDLE, references: [...BUNDLE.references, { sessionId: 'id\n2' }] };
  delete old.view;
  assert.deepEqual(referenceView(old), {
    line: 'Referenced: Regional sales Q3, id\\x0a2',
    sources: [{ title: 'Regional sales Q3', state: '', rows: [] }, { title: 'id\\x0a2', state: '', rows: [] }],
    preview: null
  });
  const broken = { ...BUNDLE, view: { line: 'x', sources: [{ title: 'a', state: 's', rows: [['only one']] }] } };
  assert.equal(referenceView(broken).line, 'Referenced: Regional sales Q3');
  const noPreview = { ...BUNDLE, view: { ...BUNDLE.view, preview: null } };
  assert.equal(referenceView(noPreview).preview, null);
});
