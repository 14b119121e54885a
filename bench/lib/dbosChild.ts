/**
 * DBOS Transact's side of bench/workflows.ts, in a process of its own (DBOS
 * is a process-wide singleton: registered before launch, one system database
 * per launch). The same measurement as the parent's `measure`: a warm-up
 * execution; EXECUTIONS started at once, each awaited for its result
 * (executions/s from the first start to the last result); then 30 in
 * sequence, with each step's start recorded (a step: one activity's start to
 * the next's, or to the result for the last one).
 *
 * Two ways of starting an execution (the fourth argument):
 * - `direct`, DBOS's own default: `DBOS.startWorkflow` with a workflow ID
 *   (its idempotency key, as Docket's executionId) runs the workflow in the
 *   process that starts it, checkpointing each `DBOS.runStep` to PostgreSQL;
 *   `getResult()` waits for it.
 * - `queue[:ms]`: the same with a `queueName`, a queue registered with
 *   `DBOS.registerQueue` (polled every `ms`, DBOS's default 1,000 when not
 *   given): the execution is a row any DBOS process polling the queue may
 *   dequeue and run, the like-for-like of Docket's `execute` (an item any
 *   worker may claim). This process both starts and runs them. `getResult`
 *   polls for a queued execution's result (every second by default); with
 *   `ms` given it polls every `ms` too.
 *
 *   tsx bench/lib/dbosChild.ts <database url> <steps> <executions> [direct|queue[:ms]]
 *
 * Prints one JSON line: { perSecond, stepP50, stepP99, executionP50 }.
 */
import { DBOS } from "@dbos-inc/dbos-sdk"

const [url, stepsArg, executionsArg, modeArg = "direct"] = process.argv.slice(2)
const STEPS = Number(stepsArg)
const EXECUTIONS = Number(executionsArg)
const [mode, pollArg] = modeArg.split(":")
const QUEUE = "bench"

const starts = new Map<string, Array<number>>()

const body = async (key: string): Promise<number> => {
  let sum = 0
  for (let s = 1; s <= STEPS; s++) {
    sum += await DBOS.runStep(async () => {
      starts.set(key, [...(starts.get(key) ?? []), performance.now()])
      return s
    }, { name: `s${s}` })
  }
  return sum
}
const workflow = DBOS.registerWorkflow(body, { name: `Steps${STEPS}` })

const execute = async (key: string) => {
  const handle = await DBOS.startWorkflow(workflow, { workflowID: key, ...(mode === "queue" ? { queueName: QUEUE } : {}) })(key)
  // A queued execution's result is polled for (every second by default), at the queue's own interval when given.
  return handle.getResult(pollArg === undefined ? undefined : { pollingIntervalMs: Number(pollArg) })
}

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
}

const main = async () => {
  DBOS.setConfig({ name: "docket-bench", systemDatabaseUrl: url, logLevel: "error" })
  await DBOS.launch()
  if (mode === "queue") {
    await DBOS.registerQueue(QUEUE, pollArg === undefined ? {} : { minPollingIntervalMs: Number(pollArg) })
  }
  const run = Math.random().toString(36).slice(2, 8)
  await execute(`${run}-warm`)
  const t0 = performance.now()
  await Promise.all(Array.from({ length: EXECUTIONS }, (_, n) => execute(`${run}-${n}`)))
  const perSecond = EXECUTIONS / ((performance.now() - t0) / 1000)
  const steps: Array<number> = []
  const executions: Array<number> = []
  for (let n = 0; n < 30; n++) {
    const key = `${run}-seq-${n}`
    const t = performance.now()
    await execute(key)
    const end = performance.now()
    executions.push(end - t)
    const s = starts.get(key) ?? []
    for (let i = 1; i < s.length; i++) steps.push(s[i] - s[i - 1])
    steps.push(end - s[s.length - 1])
  }
  await DBOS.shutdown()
  console.log(JSON.stringify({ perSecond, stepP50: quantile(steps, 0.5), stepP99: quantile(steps, 0.99), executionP50: quantile(executions, 0.5) }))
  process.exit(0)
}

void main()
