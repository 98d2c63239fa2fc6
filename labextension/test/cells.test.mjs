// The `@cell` rows of the `@` popup (DOM-free modules, compiled lib/), run on plain Node:
//   node --experimental-detect-module --test test/
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { CELL_LIMIT, cellChoices, cellIdItems, firstLine, meantCell, meantItem } from '../lib/cells.js';
import { filterDshItems, variableItem } from '../lib/items.js';

const model = (id, type, source) => ({ id, type, sharedModel: { getSource: () => source } });
const cellItems = (cells, active, prompt) => [meantItem(cells, active, prompt), ...cellIdItems(cells, prompt)].filter(Boolean);
const CELLS = cellChoices([
  model('notes', 'markdown', '\n# Sales\nmore'),
  model('load-sales', 'code', "df = load('sales.csv')"),
  model('ask', 'code', '%%dsh\nwhy does @cell fail?')
]);

test('a prompt cell means the cell above it; the sidebar means the selected cell', () => {
  assert.equal(meantCell(CELLS, 'ask', 'ask').id, 'load-sales');
  assert.equal(meantCell(CELLS, 'notes', null).id, 'notes');
  assert.equal(meantCell(CELLS, 'notes', 'notes'), null); // a prompt in the first cell: nothing above
  assert.equal(meantCell(CELLS, null, null), null);
});

test('@cell comes first with the meant cell\'s first line, then the other cells by id', () => {
  const rows = cellItems(CELLS, 'ask', 'ask');
  assert.deepEqual(
    rows.map(r => [r.insertText, r.dsh.detail]),
    [
      ['@cell', "cell above · df = load('sales.csv')"],
      ['@cell:notes', 'markdown · # Sales'],
      ['@cell:load-sales', "code · df = load('sales.csv')"]
    ]
  );
  assert.equal(cellItems(CELLS, 'notes', null)[0].dsh.detail, 'selected · # Sales');
  assert.equal(cellItems(CELLS, null, null)[0].insertText, '@cell:notes'); // nothing selected: ids only
  const hostile = cellChoices([model('x', 'code', 'print("\x1b[31m")'), model('bad id', 'code', 'y')]);
  assert.deepEqual(cellItems(hostile, 'x', null).map(r => r.dsh.detail), [
    'selected · print("\\x1b[31m")',
    'code · print("\\x1b[31m")'
  ]);
  const many = cellChoices(Array.from({ length: 100 }, (_, i) => model(`c${i}`, 'code', `x = ${i}`)));
  assert.equal(cellItems(many, 'c5', null).length, CELL_LIMIT + 1);
  assert.equal(meantItem(CELLS, 'notes', 'notes'), null);
  assert.equal(firstLine('   \n\n'), '(empty)');
  assert.equal(firstLine('%%dsh --new\n\nwhy does it fail?'), '%%dsh why does it fail?');
  assert.equal(firstLine('%%dsh'), '%%dsh');
  assert.equal(firstLine('a'.repeat(200)).length, 80);
});

test('cells filter on @cell, their id and first line; @cell comes before variables, the ids after', () => {
  const items = [
    meantItem(CELLS, 'ask', 'ask'),
    variableItem({ name: 'df', kind: 'dataframe', type: 'DataFrame', brief: 'DataFrame 3×2', mention: '@[df](dsh-variable:df)' }),
    ...cellIdItems(CELLS, 'ask')
  ];
  assert.deepEqual(filterDshItems(items, '@').map(i => i.label), ['cell', 'df', 'cell:notes', 'cell:load-sales']);
  assert.deepEqual(filterDshItems(items, '@df').map(i => i.label), ['df', 'cell:load-sales']);
  assert.deepEqual(filterDshItems(items, '@cell:lo').map(i => i.label), ['cell:load-sales']);
  assert.deepEqual(filterDshItems(items, '@sales').map(i => i.label), ['cell:notes', 'cell:load-sales']);
  assert.deepEqual(filterDshItems(items, '@"cell').map(i => i.label), []); // a quoted path is a file
});
