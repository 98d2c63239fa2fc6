// What the notebook's kernel says about its current session (lib/kernel.js), on plain Node with a fake kernel:
//   node --experimental-detect-module --test test/
import assert from 'node:assert/strict';
import { test } from 'node:test';

globalThis.window ??= { setTimeout, clearTimeout };
globalThis.WebSocket ??= class {}; // @jupyterlab/services looks for one as it loads

const { currentSessionId, lastSessionId } = await import('../lib/kernel.js');

/** A kernel whose answers to the current-session question come after the delays given, one per question. */
function slowKernel(id, answers) {
  const kernel = {
    id,
    status: 'idle',
    info: Promise.resolve({}),
    supportsSubshells: false,
    createComm() {
      const [sessionId, delay] = answers.shift();
      const comm = {
        commsOverSubshells: 'disabled',
        onMsg: null,
        onClose: null,
        open() {
          setTimeout(() => comm.onMsg({ content: { data: { sessionId } } }), delay);
        },
        dispose() {}
      };
      return comm;
    }
  };
  return { sessionContext: { session: { kernel } } };
}

test("a late answer to an older question never replaces a newer question's answer", async () => {
  // Asked right after `%load_ext` (no session yet), answered late; asked again after the first `%%dsh` cell.
  const panel = slowKernel('k-1', [
    [null, 150],
    ['s-1', 10]
  ]);
  const first = currentSessionId(panel);
  const second = await currentSessionId(panel);
  assert.equal(second, 's-1');
  assert.equal(await first, null); // its own caller still gets what the kernel said then
  await new Promise(resolve => setTimeout(resolve, 50));
  assert.equal(lastSessionId(panel), 's-1');
});

test('a newer answer replaces the one before', async () => {
  const panel = slowKernel('k-2', [
    ['s-1', 5],
    ['s-2', 5]
  ]);
  assert.equal(await currentSessionId(panel), 's-1');
  assert.equal(await currentSessionId(panel), 's-2');
  assert.equal(lastSessionId(panel), 's-2');
});
