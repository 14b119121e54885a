/**
 * The `docket` command's entry point, run by bin/docket.mjs: compiled
 * (dist/cli/main.js) in an installed package, under tsx in a git checkout.
 * It sets V8's heap flags (heapGrowth.ts), then loads the command: for a
 * plain `enqueue` or `stats` command line only that command, parsed by hand
 * (hotArgv.ts, hot.ts: no @effect/cli), for every other line the whole
 * command (run.ts).
 *
 * The command is imported dynamically: a module's static imports are all
 * loaded and compiled before its first line runs, and loading the command's
 * 700-800 modules is most of its start's allocation. With the young
 * generation held from here, `docket worker` at rest (SQLite, compiled) has
 * 2 MB of it instead of 29.5 (heap.ts): flags set by a static first import
 * took effect only after every module had loaded (934 ms into the start).
 *
 * Compiled, `enqueue` and `stats` run from their bundle, dist/hot/
 * (scripts/bundleHot.mjs says why only they): a dozen files instead of about
 * 650 modules. A line that names neither goes straight to run.ts; one that
 * does but is not read by hand (help, a typo) loads the bundle's parser and
 * then run.ts, as before.
 */
import "./heapGrowth.js"
import { existsSync } from "node:fs"

type Hot = typeof import("./hot.js")
type HotArgv = typeof import("./hotArgv.js")

const args = process.argv.slice(2)
const named = args.includes("enqueue") || args.includes("stats")
const bundled = new URL("../hot/hot.js", import.meta.url)
const fromBundle = named && existsSync(bundled)
const { parseHot }: HotArgv = named
  ? await import(fromBundle ? new URL("../hot/hotArgv.js", import.meta.url).href : "./hotArgv.js")
  : { parseHot: () => undefined }
const hot = parseHot(args)
if (hot === undefined) await import("./run.js")
else {
  const { runHot }: Hot = await import(fromBundle ? bundled.href : "./hot.js")
  runHot(hot)
}
