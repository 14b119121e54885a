// `npm run build` (also run by `prepack`, so by every `npm pack` and `npm
// publish`): compiles src/ with tsc (tsconfig.build.json) into dist/, ES
// modules with .d.ts and source maps, then copies the dashboard's front-end
// library (uPlot: its minified script, its style sheet, its licence and
// version) into dist/vendor/uplot/, so the installed package serves the
// chart from its own files: nothing from a CDN, and no front-end package
// among its runtime dependencies; and bundles `enqueue` and `stats` into
// dist/hot/ (bundleHot.mjs says why). dist/ is removed first so that nothing a
// deleted or renamed source left there is shipped.
import { execFileSync } from "node:child_process"
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { bundleHot } from "./bundleHot.mjs"

const root = fileURLToPath(new URL("..", import.meta.url))
const require = createRequire(import.meta.url)
rmSync(new URL("../dist", import.meta.url), { recursive: true, force: true })
const tsc = require.resolve("typescript/bin/tsc")
execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: root, stdio: "inherit" })

const uplot = dirname(require.resolve("uplot/package.json"))
const vendor = join(root, "dist", "vendor", "uplot")
mkdirSync(vendor, { recursive: true })
for (const file of ["dist/uPlot.iife.min.js", "dist/uPlot.min.css", "LICENSE"]) {
  copyFileSync(join(uplot, file), join(vendor, file.replace(/^dist\//, "")))
}
const { version } = JSON.parse(readFileSync(join(uplot, "package.json"), "utf8"))
writeFileSync(join(vendor, "version.json"), JSON.stringify({ name: "uplot", version }) + "\n")
const hot = await bundleHot(root)
console.log(`built dist/ (with uPlot ${version} in dist/vendor/uplot/; enqueue and stats bundled in dist/hot/: ${hot.modules} modules in ${hot.files} files)`)
