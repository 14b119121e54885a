/**
 * The `docket` command's entry point, run by bin/docket.mjs: compiled
 * (dist/cli/main.js) in an installed package, under tsx in a git checkout.
 * It sets V8's heap flags (heapGrowth.ts), then loads the command: for a
 * plain `enqueue`, `stats` or `worker` command line only that command, parsed
 * by hand (hotArgv.ts, hot.ts, hotWorker.ts: no @effect/cli), for every other
 * line the whole command (run.ts).
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
 * 650 modules. `worker` is read by hand too, never bundled (hotWorker.ts). A
 * line that names none of them goes straight to run.ts; one that does but is
 * not read by hand (help, a typo) loads the parser and then run.ts, as before.
 */
import "./heapGrowth.js"
import { existsSync } from "node:fs"

type Hot = typeof import("./hot.js")
type HotArgv = typeof import("./hotArgv.js")
type HotWorker = typeof import("./hotWorker.js")

const args = process.argv.slice(2)
const query = args.includes("enqueue") || args.includes("stats")
const bundled = new URL("../hot/hot.js", import.meta.url)
const fromBundle = query && existsSync(bundled)
const parser = (bundle: boolean): Promise<HotArgv> =>
  import(bundle ? new URL("../hot/hotArgv.js", import.meta.url).href : "./hotArgv.js")
const { parseHot }: HotArgv = query || args.includes("worker") ? await parser(fromBundle) : { parseHot: () => undefined }
const hot = parseHot(args)
if (hot === undefined) await import("./run.js")
else if (hot.command === "worker") {
  // Read again by the unbundled parser if the bundle's read it (`worker
  // --tasks stats`): the worker's values must be of the application's Effect.
  const line = fromBundle ? (await parser(false)).parseHot(args) : hot
  const { runHotWorker }: HotWorker = await import("./hotWorker.js")
  if (line?.command === "worker") runHotWorker(line)
} else {
  const { runHot }: Hot = await import(fromBundle ? bundled.href : "./hot.js")
  runHot(hot)
}
