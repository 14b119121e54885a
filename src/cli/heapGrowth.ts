/**
 * Sets the command's heap growing factor (heap.ts says why) as a module's
 * side effect: main.ts imports this first, so it runs before the modules
 * after it load. A bad DOCKET_HEAP_GROWING_PERCENT stops the command here,
 * exit 2, before anything is opened. The young generation is held at its
 * first size until the command's work begins (`releaseYoungGeneration`).
 */
import { setFlagsFromString } from "node:v8"
import { growingPercent, HEAP_VARIABLE, YOUNG_GROWTH_DEFAULT, YOUNG_GROWTH_HELD, youngGrowthGiven } from "./heap.js"

const chosen = growingPercent(process.execArgv, process.env[HEAP_VARIABLE])
if ("error" in chosen) {
  process.stderr.write(`docket: ${chosen.error}\n`)
  process.exit(2)
}
if (chosen.percent !== undefined) setFlagsFromString(`--heap-growing-percent=${chosen.percent}`)

const holdYoung = !youngGrowthGiven(process.execArgv)
if (holdYoung) setFlagsFromString(`--semi-space-growth-factor=${YOUNG_GROWTH_HELD}`)

/**
 * Lets the young generation grow again (V8's own factor), where a command's
 * work at volume begins: a worker once its pool has started, a bulk enqueue.
 */
export const releaseYoungGeneration = (): void => {
  if (holdYoung) setFlagsFromString(`--semi-space-growth-factor=${YOUNG_GROWTH_DEFAULT}`)
}
