/**
 * A dashboard served in the test's process on loopback (a free port), over a
 * fresh database of a backend, with a queue seeded with an item in every
 * state, a live worker, a schedule and hostile strings; and fetch helpers.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Either, Layer, ManagedRuntime } from "effect"
import Sqlite from "better-sqlite3"
import { createServer, request } from "node:http"
import { createRequire } from "node:module"
import { Dashboard, QueueRepo, Recurring } from "../../src/index.js"
import pg from "pg"
import { repoLayer } from "./db.js"

/** Strings a hostile enqueuer or worker could store. */
export const HOSTILE = {
  img: "<img src=x onerror=alert(1)>",
  script: "</script><script>alert(2)</script>",
  key: "\"><svg onload=alert(3)>",
  worker: "<script>alert(4)</script>"
}

export interface Seeded {
  readonly waiting: number
  readonly scheduled: number
  readonly running: number
  readonly done: number
  readonly dead: number
  readonly cancelled: number
}

export interface Served {
  /** The dashboard's root URL, base path included, without a trailing slash. */
  readonly root: string
  /** The Host header value the server sees (127.0.0.1:port). */
  readonly host: string
  /** Runs a QueueRepo program on the same database. */
  readonly repo: <A, E>(f: (repo: QueueRepo.Service) => Effect.Effect<A, E>) => Promise<A>
  readonly dispose: () => Promise<void>
}

/** Serves a dashboard with `options` over the database at `url`. */
export const serve = async (url: string, options: Dashboard.Options): Promise<Served> => {
  const layer = Dashboard.layer(options).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
    Layer.provideMerge(repoLayer(url))
  )
  const runtime = ManagedRuntime.make(layer)
  const address = await runtime.runPromise(Effect.map(HttpServer.HttpServer, (s) => s.address))
  if (address._tag !== "TcpAddress") throw new Error("not a TCP address")
  const host = `127.0.0.1:${address.port}`
  return {
    root: `http://${host}${options.basePath ?? ""}`,
    host,
    repo: (f) => runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, f)),
    dispose: () => runtime.dispose()
  }
}

/** An item in every state (and hostile strings in payloads, a key, an error, a result), a live worker, a schedule. */
export const seed = (repo: QueueRepo.Service): Effect.Effect<Seeded, unknown> =>
  Effect.gen(function*() {
    const waiting = (yield* repo.enqueue("mail.send", { to: "ada@example.com", note: HOSTILE.img }, { key: HOSTILE.key })).id
    const scheduled = (yield* repo.enqueue("mail.send", { to: "later@example.com" }, { delay: "1 hour" })).id
    const running = (yield* repo.enqueue("report.build", { report: "weekly" })).id
    yield* repo.claim({ worker: "host-a:1:run", limit: 1, lease: "10 minutes", kinds: ["report.build"] })
    const done = (yield* repo.enqueue("export.run", { export: 1 })).id
    const [doneClaim] = yield* repo.claim({ worker: "host-a:1:run", limit: 1, lease: "1 minute", kinds: ["export.run"] })
    yield* repo.complete(doneClaim, { url: "https://example.com/x", html: HOSTILE.script })
    const dead = (yield* repo.enqueue("hostile.kind", { html: HOSTILE.img, s: HOSTILE.script })).id
    const [deadClaim] = yield* repo.claim({ worker: "host-a:1:run", limit: 1, lease: "1 minute", kinds: ["hostile.kind"] })
    yield* repo.fail(deadClaim, `Permanent: ${HOSTILE.img} ${HOSTILE.script}`, { _tag: "Dead" })
    const cancelled = (yield* repo.enqueue("mail.send", { to: "nobody@example.com" })).id
    yield* repo.cancel([cancelled], { reason: "sent by hand" })
    yield* repo.heartbeatWorker({
      id: "w#1", name: HOSTILE.worker, host: "host-a", pid: 42, kinds: ["mail.send", "report.build"], concurrency: 4,
      version: "9.9.9", running: 1
    })
    const declaration = Either.getOrThrow(Recurring.check(Recurring.make("digest.daily", { cron: "0 6 * * *", kind: "mail.digest" })))
    yield* repo.declareSchedule(declaration)
    return { waiting, scheduled, running, done, dead, cancelled }
  })

/** A GET, never following redirects. */
export const get = (url: string, headers: Record<string, string> = {}) => fetch(url, { redirect: "manual", headers })

/** The status of a GET of `path` sent to `address`:`port` with the Host header `host` (fetch cannot set Host). */
export const statusWithHost = (port: number, path: string, host: string, address = "127.0.0.1") =>
  new Promise<number>((resolve, reject) => {
    const req = request({ host: address, port, path, headers: { host } }, (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.on("error", reject)
    req.end()
  })

/** A POST of a form (urlencoded), never following redirects. */
export const postForm = (url: string, fields: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(fields).toString()
  })

/** A POST with an optional JSON body. */
export const postJson = (url: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    redirect: "manual",
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body)
  })

/** The CSP every response must carry. */
export const CSP =
  "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

/** Parses Prometheus' text format strictly: every line a comment or `name{labels} value`; samples by their series text. */
export const parseMetrics = (text: string): Map<string, number> => {
  const samples = new Map<string, number>()
  const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"(?:,|(?=\})))*\})? (-?[0-9.e+-]+|NaN|\+Inf|-Inf)$/
  const comment = /^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$/
  for (const line of text.split("\n")) {
    if (line === "") continue
    if (comment.test(line)) continue
    const m = sample.exec(line)
    if (m === null) throw new Error(`not Prometheus text: ${line}`)
    samples.set(`${m[1]}${m[2] ?? ""}`, Number(m[3]))
  }
  return samples
}

/** The one script tag a page may hold: the package's own file, no inline code. */
export const scriptTag = (base: string) => `<script src="${base}/assets/dashboard-1.js" defer></script>`

const UPLOT_VERSION = (createRequire(import.meta.url)("uplot/package.json") as { version: string }).version

/** The overview's chart scripts: uPlot's file (as installed with the package) and the dashboard's that draws it. */
export const chartScriptTags = (base: string) =>
  `<script src="${base}/assets/uplot-${UPLOT_VERSION}.min.js" defer></script><script src="${base}/assets/chart-2.js" defer></script>`

/** A page's body without its allowed script tags, the package's own files (to check that nothing else is a script). */
export const withoutOwnScript = (body: string, base: string) =>
  body.split(scriptTag(base)).join("").split(chartScriptTags(base)).join("")

/** Runs one writing statement straight on the database (a test moves time by editing rows). */
export const execDb = async (url: string, sqlite: string, postgres: string, params: ReadonlyArray<unknown>): Promise<void> => {
  if (!url.startsWith("postgres")) {
    const db = new Sqlite(url, { fileMustExist: true })
    try {
      db.pragma("busy_timeout = 10000")
      db.prepare(sqlite).run(...params)
    } finally {
      db.close()
    }
    return
  }
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(postgres, [...params])
  } finally {
    await client.end()
  }
}
