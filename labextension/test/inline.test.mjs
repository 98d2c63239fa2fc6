// When a ghost-text completion is pointless (nothing is sent), run on plain Node against the compiled lib/:
//   node --experimental-detect-module --test test/
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { completionMode, lineState, pointlessReason } from '../lib/inline_rules.js';

const at = text => pointlessReason(text.replace('|', ''), text.indexOf('|'));

test('code worth completing is asked for', () => {
  assert.equal(at('radius = 2\nrad|'), null);
  assert.equal(at('print(|)'), null);
  assert.equal(at('x = "a" # not a comment yet\ny = |'), null);
  assert.equal(at('s = "#hash in a string" + |'), null);
});

test('pointless places send nothing', () => {
  assert.equal(at('|'), 'empty cell');
  assert.equal(at('   \n|'), 'empty cell');
  assert.equal(at('pri|nt(x)'), 'inside a word');
  assert.equal(at('x = 1  # the answer is |'), 'after a comment hash');
  assert.equal(at('open("data/sal|'), 'typing a path in a string');
  assert.equal(at("open('./|"), 'typing a path in a string');
  assert.equal(at('df.to_csv("out.csv|'), 'typing a path in a string');
});

test('strings and comments are read like Python', () => {
  assert.deepEqual(lineState('x = "a\\"b'), { comment: false, string: 'a\\"b' });
  assert.deepEqual(lineState('x = """doc'), { comment: false, string: 'doc' });
  assert.deepEqual(lineState("x = 'a' # c"), { comment: true, string: null });
  assert.deepEqual(lineState('x = "a" + \'b\''), { comment: false, string: null });
});

test('%%dsh cells complete prose, but not on the magic line or in a mention', () => {
  assert.equal(completionMode('%%dsh\nSummarise'), 'prose');
  assert.equal(completionMode('print(1)'), 'code');
  assert.equal(at('%%dsh\nSummarise the data |'), null);
  assert.equal(at('%%dsh\n# a heading is prose, not a comment|'), null);
  assert.equal(at('%%dsh --mod|'), 'on the %%dsh line');
  assert.equal(at('%%dsh\nCompare @sal|'), 'in an @ mention');
});
