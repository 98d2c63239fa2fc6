// Mention chips and the sidebar's state messages (DOM-free parts, compiled lib/), run on plain Node:
//   node --experimental-detect-module --test test/
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { chipText, findMentions, unescapeLabel } from '../lib/chips.js';
import { parseState } from '../lib/sidebar_kernel.js';

test('mentions are found with their label unescaped and their URI kept', () => {
  const text = 'Compare @[Regional \\] sales](dsh-session:IjU0) with @[df](dsh-variable:df) and @notes.md';
  const found = findMentions(text);
  assert.deepEqual(
    found.map(m => [m.label, m.uri, m.kind, text.slice(m.from, m.to).startsWith('@[')]),
    [
      ['Regional ] sales', 'dsh-session:IjU0', 'session', true],
      ['df', 'dsh-variable:df', 'variable', true]
    ]
  );
  assert.equal(unescapeLabel('a\\\\b\\]'), 'a\\b]');
});

test('a chip shows @label with controls and hidden characters made visible', () => {
  assert.equal(chipText('evil\u202eoops\n'), '@evil⟨U+202E⟩oops\\x0a');
});

test('malformed mentions are not chips', () => {
  assert.deepEqual(findMentions('@[x](http://example.org) @[y](dsh-session:a b) @[z]'), []);
});

test('the sidebar state is read defensively', () => {
  assert.equal(parseState({ kind: 'state', modelId: 3 }), null);
  assert.equal(parseState({ kind: 'sent' }), null);
  const state = parseState({
    kind: 'state',
    modelId: 'm1',
    sessionId: null,
    busy: 'yes',
    model: 4,
    models: [{ spec: null, label: 'offline (default)', available: true, note: '' }, { spec: 5 }]
  });
  assert.deepEqual(state, {
    modelId: 'm1',
    sessionId: null,
    busy: false,
    model: null,
    models: [{ spec: null, label: 'offline (default)', available: true, note: '' }]
  });
});
