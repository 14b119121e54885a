/**
 * Sets the command's heap growing factor (heap.ts says why) as a module's
 * side effect: main.ts imports this first, so it runs before the modules
 * after it load. A bad DOCKET_HEAP_GROWING_PERCENT stops the command here,
 * exit 2, before anything is opened.
 */
import { setFlagsFromString } from "node:v8"
import { growingPercent, HEAP_VARIABLE } from "./heap.js"

const chosen = growingPercent(process.execArgv, process.env[HEAP_VARIABLE])
if ("error" in chosen) {
  process.stderr.write(`docket: ${chosen.error}\n`)
  process.exit(2)
}
if (chosen.percent !== undefined) setFlagsFromString(`--heap-growing-percent=${chosen.percent}`)
