// The variable rows of the `@` popup (DOM-free modules, compiled lib/), run on plain Node:
//   node --experimental-detect-module --test test/
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { filterDshItems, sessionItem, variableItem } from '../lib/items.js';
import { parseVariables } from '../lib/variables.js';

const DF = {
  name: 'df',
  kind: 'dataframe',
  type: 'DataFrame',
  brief: 'DataFrame 1,000×4',
  mention: '@[df](dsh-variable:df)'
};

test('a variable row shows its name, then type and shape, and inserts its mention', () => {
  const item = variableItem(DF);
  assert.equal(item.label, 'df');
  assert.equal(item.insertText, '@[df](dsh-variable:df)');
  assert.equal(item.type, 'variable');
  assert.equal(item.dsh.kind, 'variable');
  assert.equal(item.dsh.detail, 'DataFrame 1,000×4');
  const hostile = variableItem({ ...DF, name: 'x', brief: 'str \x1b[31m' });
  assert.equal(hostile.dsh.detail, 'str \\x1b[31m');
});

test('variables filter on their name and keep their place before sessions', () => {
  const session = sessionItem({
    sessionId: 's-1',
    label: 'df review',
    cwd: '/nb',
    sameWorkspace: true,
    createdAt: 0,
    mention: '@[df review](dsh-session:InMtMSI)'
  });
  const sales = variableItem({ ...DF, name: 'sales', mention: '@[sales](dsh-variable:sales)' });
  const items = [variableItem(DF), sales, session];
  assert.deepEqual(filterDshItems(items, '@').map(i => i.label), ['df', 'sales', 'df review']);
  assert.deepEqual(filterDshItems(items, '@DF').map(i => i.label), ['df', 'df review']);
  assert.deepEqual(filterDshItems(items, '@df rev').map(i => i.label), ['df review']);
  assert.deepEqual(filterDshItems(items, '@"df').map(i => i.label), []);
});

test('parseVariables keeps only well-formed entries', () => {
  assert.deepEqual(parseVariables({ variables: [DF] }), [DF]);
  assert.deepEqual(parseVariables(null), []);
  assert.deepEqual(parseVariables({ variables: 'df' }), []);
  assert.deepEqual(
    parseVariables({ variables: [{ ...DF, mention: '@[df](dsh-session:x)' }, { ...DF, brief: 3 }, 'df'] }),
    []
  );
});
