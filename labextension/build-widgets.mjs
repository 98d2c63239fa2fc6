// Bundles the anywidget views (src/widgets/*.ts, which import ../escape.ts and the other shared modules)
// into one ES module each in ../dsh_jupyter/ui/static/, the `_esm` files the Python widgets load.
// Part of `jlpm build` (so `pip install` and the wheel build make them); `node build-widgets.mjs --watch`
// rebuilds on every change. Types are checked by `tsc -p tsconfig.widgets.json` (`jlpm build:widgets`).
import * as esbuild from 'esbuild';

/** The views, one bundle each (a Python widget's `_esm` names the bundle). */
export const VIEWS = ['chat', 'picker', 'prompt', 'approval'];

const options = {
  entryPoints: VIEWS.map(name => `src/widgets/${name}.ts`),
  outdir: '../dsh_jupyter/ui/static',
  bundle: true,
  format: 'esm',
  target: 'es2020',
  charset: 'utf8',
  legalComments: 'none',
  logLevel: 'warning',
  banner: {
    js: '// Built from labextension/src/widgets/ by `jlpm build:widgets`: edit the TypeScript there, not this file.'
  }
};

if (process.argv.includes('--watch')) {
  const context = await esbuild.context({ ...options, logLevel: 'info' });
  await context.watch();
} else {
  await esbuild.build(options);
}
