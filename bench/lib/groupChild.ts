/**
 * A worker process of the groups benchmark (bench/groups.ts), run from source
 * under tsx (memory is not measured here). Loads one system, starts its worker
 * on `go` with a no-op handler that records each run, reports how many ran
 * (and how many from `markFrom` on: W8's small groups), and on `stop` stops
 * the worker and sends its records.
 */
import { loadGroupSystem } from "../adapters/groups.js"
import type { GroupPayload } from "../adapters/groups.js"
import type { GroupChildConfig, GroupFromChild, GroupToChild } from "./groupProtocol.js"
import { now } from "./protocol.js"

const send = (message: GroupFromChild) => {
  if (process.send) process.send(message)
}

const sendAndExit = (message: GroupFromChild, code: number) => {
  const exit = () => setTimeout(() => process.exit(code), 20)
  if (process.send) process.send(message, undefined, {}, exit)
  else exit()
}

const main = async () => {
  const config = JSON.parse(process.argv[2] ?? "{}") as GroupChildConfig
  const system = loadGroupSystem(config.system)
  // Flat records, four numbers a run: index, group, start, end.
  const records: Array<number> = []
  const latencies: Array<number> = []
  let done = 0
  let marked = 0
  let timer: NodeJS.Timeout | undefined
  const progress = () => {
    timer = undefined
    send({ type: "progress", done, marked })
  }
  const handler = (payload: GroupPayload) => {
    const start = now()
    done++
    if (payload.i >= config.markFrom) {
      marked++
      latencies.push(start - payload.t)
    }
    records.push(payload.i, payload.g, start, now())
    timer ??= setTimeout(progress, 10)
  }
  let worker: { readonly stop: () => Promise<void> } | undefined
  process.on("message", (message: GroupToChild) => {
    void (async () => {
      try {
        if (message.type === "go") {
          worker = await system.startWorker(config.target, handler, { concurrency: config.concurrency, limit: config.limit })
          send({ type: "started" })
        } else {
          await worker?.stop()
          sendAndExit({ type: "result", records, latencies }, 0)
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
