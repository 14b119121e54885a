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
 */
import "./heapGrowth.js"

const { parseHot } = await import("./hotArgv.js")
const hot = parseHot(process.argv.slice(2))
if (hot === undefined) await import("./run.js")
else (await import("./hot.js")).runHot(hot)
