/**
 * A worker process of the benchmark: loads one contender, waits for `go`,
 * runs the contender's worker with the benchmark's handler, reports progress,
 * and on `stop` stops the worker and sends what it measured.
 *
 * The handler records the payload index of every successful run (the harness
 * checks each job ran exactly once), the enqueue-to-start latency, and in
 * "retry" mode fails the first attempt of every job.
 */
import { monitorEventLoopDelay } from "node:perf_hooks"
import { load, isName } from "../adapters/registry.js"
import type { JobHandler, Payload, RunningWorker } from "../adapters/types.js"
import { counts, countPg, countSqlite, peakRssKb } from "./instrument.js"
import type { ChildConfig, FromChild, ToChild } from "./protocol.js"
import { fromPerformance, now } from "./protocol.js"

const send = (message: FromChild) => {
  if (process.send) process.send(message)
}

const sendAndExit = (message: FromChild, code: number) => {
  const exit = () => setTimeout(() => process.exit(code), 20)
  if (process.send) process.send(message, undefined, {}, exit)
  else exit()
}

const main = async () => {
  const config = JSON.parse(process.argv[2] ?? "{}") as ChildConfig
  if (!isName(config.contender)) throw new Error(`unknown contender ${config.contender}`)
  if (config.target.store === "pg") {
    countPg(config.projectDir)
  } else if (config.target.store === "sqlite") {
    countSqlite(config.projectDir)
  }
  const contender = await load(config.contender)

  const seen: Array<number> = []
  const latencies: Array<number> = []
  const starts: Array<readonly [number, number]> = []
  const returned: Array<readonly [number, number]> = []
  const failedOnce = new Set<number>()
  let failures = 0
  let firstStart = 0
  let lastEnd = 0

  let progressTimer: NodeJS.Timeout | undefined
  const progress = () => {
    progressTimer = undefined
    send({ type: "progress", done: seen.length, failures })
  }
  const noteDone = () => {
    if (seen.length === config.expect) {
      if (progressTimer !== undefined) clearTimeout(progressTimer)
      progress()
    } else if (progressTimer === undefined) {
      progressTimer = setTimeout(progress, 10)
    }
  }

  const handler: JobHandler = (payload: Payload) => {
    const start = now()
    if (firstStart === 0) firstStart = start
    if (config.mode === "retry" && !failedOnce.has(payload.i)) {
      failedOnce.add(payload.i)
      failures++
      lastEnd = now()
      noteDone()
      throw new Error("fails once on purpose")
    }
    latencies.push(start - payload.t)
    if (config.recordStarts) starts.push([payload.i, start])
    seen.push(payload.i)
    lastEnd = now()
    noteDone()
  }

  const loadedRssKb = Math.round(process.memoryUsage().rss / 1024)
  let sampledMax = 0
  let heapAtPeak = { heapUsed: 0, heapTotal: 0, external: 0 }
  const sample = () => {
    const m = process.memoryUsage()
    if (m.rss > sampledMax) {
      sampledMax = m.rss
      const mb = (x: number) => Math.round(x / 1024 / 1024)
      heapAtPeak = { heapUsed: mb(m.heapUsed), heapTotal: mb(m.heapTotal), external: mb(m.external) }
    }
  }
  const sampler = setInterval(sample, 50)
  sampler.unref()
  const loop = monitorEventLoopDelay({ resolution: 10 })
  // The histogram has no sample while the loop never turns (a synchronous
  // drain), so stalls are also measured as the longest gap between the ticks
  // of a 10 ms timer, the last one counted until `stop`.
  let lastTick = 0
  let maxGap = 0
  // W3: what lies under the slowest pickups, the GC pauses and the loop's stalls.
  const gcPauses: Array<readonly [number, number]> = []
  const loopStalls: Array<readonly [number, number]> = []
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcPauses.push([fromPerformance(e.startTime), e.duration])
  })
  if (config.recordStarts) gcObserver.observe({ entryTypes: ["gc"] })
  const ticker = setInterval(() => {
    const t = performance.now()
    if (lastTick > 0) {
      const gap = t - lastTick - 10
      maxGap = Math.max(maxGap, gap)
      if (config.recordStarts && gap > 2) loopStalls.push([fromPerformance(lastTick + 10), gap])
    }
    lastTick = t
  }, 10)
  ticker.unref()

  let worker: RunningWorker | undefined
  let startMs = 0
  let cpuAtStart = process.cpuUsage()
  let startCpuMs = 0

  process.on("message", (message: ToChild) => {
    void (async () => {
      try {
        if (message.type === "go") {
          loop.enable()
          lastTick = performance.now()
          maxGap = 0
          const cpuAtGo = process.cpuUsage()
          const t0 = now()
          worker = await contender.startWorker(config.target, handler, {
            concurrency: config.concurrency,
            mode: config.mode
          })
          startMs = now() - t0
          cpuAtStart = process.cpuUsage()
          startCpuMs = (cpuAtStart.user - cpuAtGo.user + cpuAtStart.system - cpuAtGo.system) / 1000
          send({ type: "started" })
        } else if (message.type === "series") {
          const client = worker?.client
          if (client === undefined) throw new Error(`${contender.name} has no in-process client`)
          const t0 = now()
          for (let k = 0; k < message.count; k++) {
            const due = t0 + k * message.intervalMs
            const wait = due - now()
            if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
            await client.enqueueOne({ i: k, t: now() })
            returned.push([k, now()])
          }
          send({ type: "series-done" })
        } else if (message.type === "stop") {
          loop.disable()
          gcObserver.disconnect()
          clearInterval(ticker)
          maxGap = Math.max(maxGap, performance.now() - lastTick - 10)
          const cpu = process.cpuUsage(cpuAtStart)
          const t0 = now()
          const libStats = worker?.stats ? await worker.stats().catch(() => null) : null
          await worker?.stop()
          const stopMs = now() - t0
          const top = [...counts.byText]
            .sort((a, b) => b[1].count - a[1].count)
            .slice(0, 12)
            .map(([text, s]) => [text, s.count, s.totalMs] as const)
          clearInterval(sampler)
          sample()
          sendAndExit({
            type: "result",
            result: {
              seen,
              failures,
              firstStart,
              lastEnd,
              latencies,
              starts,
              returned,
              gcPauses,
              loopStalls,
              peakRssKb: await peakRssKb(),
              sampledRssMaxKb: Math.round(sampledMax / 1024),
              loadedRssKb,
              heapAtPeak,
              loopDelayMaxMs: Math.max(loop.count > 0 ? loop.max / 1e6 : 0, maxGap),
              loopDelayP99Ms: loop.percentile(99) / 1e6,
              cpuMs: (cpu.user + cpu.system) / 1000,
              startCpuMs,
              startMs,
              stopMs,
              statements: counts.total,
              topStatements: top,
              libStats
            }
          }, 0)
        }
      } catch (error) {
        sendAndExit({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) }, 1)
      }
    })()
  })
  send({ type: "loaded" })
}

main().catch((error) => {
  sendAndExit({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) }, 1)
})
