// `npm run build` (also run by `prepack`, so by every `npm pack` and `npm
// publish`): compiles src/ with tsc (tsconfig.build.json) into dist/, ES
// modules with .d.ts and source maps. dist/ is removed first so that nothing
// a deleted or renamed source left there is shipped.
import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
rmSync(new URL("../dist", import.meta.url), { recursive: true, force: true })
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: root, stdio: "inherit" })
console.log("built dist/")
