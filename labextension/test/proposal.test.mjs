// Unit tests of the live notebook's DOM-free logic (src/proposal.ts), on plain Node against lib/:
//   node --experimental-detect-module --test test/
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  codeText,
  diffSummary,
  lineDiff,
  MAX_DIFF_PAIRS,
  mergedMetadata,
  parseEdit,
  parseKernelMessage,
  proposalTitle,
  proposalWarning
} from '../lib/proposal.js';

const kinds = lines => lines.map(line => `${line.kind[0]} ${line.text}`);

test('lineDiff keeps common lines and marks removed and added ones', () => {
  assert.deepEqual(kinds(lineDiff('a\nb\nc\n', 'a\nB\nc\nd')), ['s a', 'r b', 'a B', 's c', 'a d']);
  assert.deepEqual(kinds(lineDiff('', 'x = 1')), ['a x = 1']);
  assert.deepEqual(kinds(lineDiff('x = 1', '')), ['r x = 1']);
  assert.deepEqual(lineDiff('', ''), []);
  assert.deepEqual(kinds(lineDiff('same', 'same')), ['s same']);
  assert.equal(diffSummary(lineDiff('a\nb\nc\n', 'a\nB\nc\nd')), '+2 −1');
});

test('lineDiff of huge sources does not align lines (bounded work)', () => {
  const big = n => Array.from({ length: n }, (_, i) => `line ${i}`).join('\n');
  const size = Math.ceil(Math.sqrt(MAX_DIFF_PAIRS)) + 1;
  const lines = lineDiff(big(size), big(size));
  assert.equal(lines.length, 2 * size);
  assert.equal(lines[0].kind, 'removed');
  assert.equal(lines[lines.length - 1].kind, 'added');
});

test('parseEdit checks the shape of an edit', () => {
  assert.deepEqual(parseEdit({ action: 'insert', cell_id: null, source: 'x' }), {
    action: 'insert', cellId: null, source: 'x', cellType: 'code', position: 'after'
  });
  assert.deepEqual(parseEdit({ action: 'replace', cell_id: 'a', source: '# t', cell_type: 'markdown', position: 'before' }), {
    action: 'replace', cellId: 'a', source: '# t', cellType: 'markdown', position: 'before'
  });
  assert.equal(parseEdit({ action: 'replace', source: 'x' }), null); // no cell id
  assert.equal(parseEdit({ action: 'delete', cell_id: 3 }), null);
  assert.equal(parseEdit({ action: 'explode', cell_id: 'a' }), null);
  assert.equal(parseEdit({ action: 'insert', source: 3 }), null);
  assert.equal(parseEdit('insert'), null);
});

test('parseKernelMessage accepts requests and withdrawals and refuses nonsense', () => {
  assert.deepEqual(parseKernelMessage({ type: 'request', id: 1, op: 'read' }), {
    type: 'request', request: { id: 1, op: 'read' }
  });
  assert.deepEqual(parseKernelMessage({ type: 'withdraw', id: 4, note: 'late' }), { type: 'withdraw', id: 4, note: 'late' });
  const propose = parseKernelMessage({
    type: 'request', id: 2, op: 'propose', reason: null, edit: { action: 'delete', cell_id: 'a' }
  });
  assert.equal(propose.request.op, 'propose');
  assert.equal(propose.request.edit.cellId, 'a');
  const outputs = parseKernelMessage({
    type: 'request', id: 3, op: 'outputs', cell_id: 'a', execution_count: 5, outputs: [{ output_type: 'stream' }, 'x']
  });
  assert.deepEqual(outputs.request, { id: 3, op: 'outputs', cellId: 'a', executionCount: 5, outputs: [{ output_type: 'stream' }] });
  for (const nonsense of [
    null, 'text', [], { type: 'request', op: 'read' }, { type: 'request', id: 1.5, op: 'read' },
    { type: 'request', id: 1, op: 'format-disk' }, { type: 'request', id: 1, op: 'apply', edit: {} },
    { type: 'request', id: 1, op: 'outputs', cell_id: 'a' }, { type: 'shout', id: 1 }
  ]) {
    assert.equal(parseKernelMessage(nonsense), null, JSON.stringify(nonsense));
  }
});

test('proposalTitle says what the agent proposes', () => {
  assert.equal(proposalTitle({ action: 'insert', cellType: 'code' }), 'The agent proposes a new code cell');
  assert.equal(proposalTitle({ action: 'insert', cellType: 'markdown' }), 'The agent proposes a new markdown cell');
  assert.equal(proposalTitle({ action: 'replace', cellType: 'code' }), 'The agent proposes a change to this cell');
  assert.equal(proposalTitle({ action: 'delete', cellType: 'code' }), 'The agent proposes to delete this cell');
});

test('codeText escapes control characters but keeps lines and tabs', () => {
  assert.equal(codeText('a\n\tb\x1b[31m'), 'a\n\tb\\x1b[31m');
});

test('a proposal with hidden characters is marked and warns in words', () => {
  const edit = parseEdit({ action: 'replace', cell_id: 'c1', source: 'print("ok")\u202e # \u2066x\u2069\n' });
  assert.equal(codeText(edit.source), 'print("ok")⟨U+202E⟩ # ⟨U+2066⟩x⟨U+2069⟩\n');
  assert.equal(
    proposalWarning(edit),
    'This edit contains 3 hidden characters (right-to-left override U+202E, left-to-right isolate U+2066, ' +
      'pop directional isolate U+2069), shown as ⟨U+…⟩ marks: the cell would not be what it looks like.'
  );
  assert.equal(proposalWarning(parseEdit({ action: 'replace', cell_id: 'c1', source: 'x = 1' })), null);
  assert.equal(proposalWarning(parseEdit({ action: 'delete', cell_id: 'c1' })), null);
});

test('parseEdit reads tags and metadata, and mergedMetadata applies them as the kernel does', () => {
  const edit = parseEdit({
    action: 'replace',
    cell_id: 'c',
    tags: ['parameters', 'parameters'],
    metadata: { scrolled: true, old: null },
    keep_source: true
  });
  assert.deepEqual(edit.tags, ['parameters', 'parameters']);
  assert.equal(edit.keepSource, true);
  assert.deepEqual(mergedMetadata({ old: 1, tags: ['x'], kept: 2 }, edit), {
    kept: 2,
    scrolled: true,
    tags: ['parameters']
  });
  assert.deepEqual(mergedMetadata({ tags: ['x'] }, { ...edit, metadata: undefined, tags: [] }), {});
  assert.equal(parseEdit({ action: 'replace', cell_id: 'c', tags: 'parameters' }), null);
  assert.equal(parseEdit({ action: 'replace', cell_id: 'c', metadata: [1] }), null);
  assert.equal(parseEdit({ action: 'insert', source: 'x' }).tags, undefined);
});
