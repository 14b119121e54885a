/**
 * How far the command lets V8's heap grow past what it keeps alive (issue 19:
 * memory). Applied by heapGrowth.ts, which main.ts imports first, so it runs
 * before Effect's modules load.
 *
 * After each full collection V8 sets the next one's threshold at the live heap
 * times a factor it picks from how cheap collecting has been: up to 4x. The
 * command's collections are cheap (its live heap is small), so V8 lets the
 * heap grow to four times it between them. Measured with --trace-gc on
 * `docket enqueue --from` of 1,000,000 lines (compiled build, PostgreSQL):
 * 41 MB alive after every full collection from the first batch to the last,
 * the heap grown to 161-167 MB before each, 268-336 MB of RSS. A factor of 2
 * (`--heap-growing-percent=100`) holds it at 182-185 MB for 1,000,000 or
 * 3,000,000 lines (SQLite 208-215 MB) at the same items/s, for about 5% more
 * of the command's CPU; a draining worker peaked at 132 MB instead of 141.
 * docs/benchmarks.md, "Bulk enqueue from the command".
 *
 * Only the command does this: the library never changes a process's V8 flags
 * (an application embedding Docket chooses its own). The flag is read at every
 * full collection, so setting it while running takes effect at the next one.
 * The operator may choose: `DOCKET_HEAP_GROWING_PERCENT=0` gives V8 its own
 * choice back, another whole number sets the factor (1 + n/100); a
 * `--heap-growing-percent` given to node itself is left as given (node refuses
 * that flag in NODE_OPTIONS, hence the variable).
 */
/** The heap may grow to twice what the last full collection kept alive. */
export const HEAP_GROWING_PERCENT = 100

/** The variable that overrides it. */
export const HEAP_VARIABLE = "DOCKET_HEAP_GROWING_PERCENT"

/**
 * The percent to set, from node's own arguments and the environment: none
 * when node was given the flag itself, an error for a variable that is not a
 * whole number from 0 to 1000.
 */
export const growingPercent = (
  execArgv: ReadonlyArray<string>,
  variable: string | undefined
): { readonly percent: number | undefined } | { readonly error: string } => {
  if (execArgv.some((f) => /^--heap[-_]growing[-_]percent\b/.test(f))) return { percent: undefined }
  if (variable === undefined || variable === "") return { percent: HEAP_GROWING_PERCENT }
  const n = /^\d{1,4}$/.test(variable.trim()) ? Number(variable.trim()) : NaN
  if (!(n <= 1000)) return { error: `${HEAP_VARIABLE} must be a whole number from 0 to 1000 (0: V8's own choice), not ${JSON.stringify(variable)}` }
  return { percent: n }
}

/**
 * V8's young generation is held at its first size (1 MB semi-spaces) while
 * the command starts, and let grow again once its work begins (issue 34:
 * memory at rest). Loading the modules allocates fast, so V8 grows the
 * semi-spaces to their 16 MB ceiling during the start and never gives the
 * room back while a worker idles: `docket worker` at rest (SQLite, compiled
 * build) kept 29.5 MB of young generation for 7 MB used, 108 MB of RSS;
 * held, 2 MB for 1 MB used, 88 MB. `docket stats` started in the same CPU
 * time (0.97x, median of 6 side by side; peak 86 MB against 102). What the
 * command then does at volume (a worker's items, `enqueue --from`) grows it
 * as before: `releaseYoungGeneration` gives back V8's own factor, and a
 * growth factor given to node itself is left as given.
 */
export const YOUNG_GROWTH_HELD = 1

/** V8's own growth factor of the young generation (node 20-24: 2). */
export const YOUNG_GROWTH_DEFAULT = 2

/** Whether node was given the young generation's growth factor itself (then the command leaves it). */
export const youngGrowthGiven = (execArgv: ReadonlyArray<string>): boolean =>
  execArgv.some((f) => /^--semi[-_]space[-_]growth[-_]factor\b/.test(f))
