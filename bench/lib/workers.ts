/**
 * Worker child processes. The child script is bundled once with esbuild
 * (Effect's packages bundled, every other package external) and run by plain `node`, so a child's memory
 * is its library's, not tsx's (tsx's loader thread adds about 38 MB of RSS).
 * Each library is loaded lazily, so a child loads only its own.
 */
import type { Plugin } from "esbuild"
import { type ChildProcess, fork } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import type { ChildConfig, ChildResult, FromChild, ToChild } from "./protocol.js"

const here = dirname(fileURLToPath(import.meta.url))
export const PROJECT_DIR = join(here, "..", "..")

// Bundled modules keep their own `import.meta.url` (Docket finds its migration
// files relative to it).
const keepImportMetaUrl: Plugin = {
  name: "keep-import-meta-url",
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, (args) => ({
      contents: readFileSync(args.path, "utf8").replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href)),
      loader: "ts"
    }))
  }
}

// Effect's packages are bundled (tree-shaken) with Docket, as an Effect
// application is often deployed (the package itself ships unbundled dist/):
// loading the whole `effect` index instead costs about 23 MB of RSS at rest.
// Every other package (pg, the peers, their drivers) loads from node_modules.
const bundleEffect: Plugin = {
  name: "bundle-effect-only",
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) =>
      /^(effect|@effect\/[^/]+)(\/|$)/.test(args.path) ? undefined : { path: args.path, external: true })
  }
}

let built: Promise<string> | undefined

/** Bundles bench/lib/child.ts into .tmp/bench-build (once per harness process). */
export const buildChild = (): Promise<string> => {
  built ??= (async () => {
    const outdir = join(PROJECT_DIR, ".tmp", "bench-build", String(process.pid))
    mkdirSync(outdir, { recursive: true })
    process.once("exit", () => rmSync(outdir, { recursive: true, force: true }))
    const esbuild = await import("esbuild")
    await esbuild.build({
      entryPoints: [join(here, "child.ts")],
      bundle: true,
      splitting: true,
      format: "esm",
      platform: "node",
      target: "node20",
      outdir,
      outExtension: { ".js": ".mjs" },
      plugins: [bundleEffect, keepImportMetaUrl],
      logLevel: "silent"
    })
    const entry = join(outdir, "child.mjs")
    if (!existsSync(entry)) throw new Error(`esbuild did not write ${entry}`)
    return entry
  })()
  return built
}

interface Child {
  readonly process: ChildProcess
  done: number
  failures: number
  output: string
  result: ChildResult | undefined
  exited: boolean
  loaded: boolean
  started: boolean
  seriesDone: boolean
}

export class WorkerGroup {
  private readonly children: Array<Child> = []
  private failure: Error | undefined
  private readonly listeners = new Set<() => void>()

  private constructor() {}

  /** Forks `procs` children and waits until each has loaded its library. */
  static async start(procs: number, config: ChildConfig): Promise<WorkerGroup> {
    const script = await buildChild()
    const group = new WorkerGroup()
    for (let i = 0; i < procs; i++) {
      const proc = fork(script, [JSON.stringify(config)], {
        cwd: PROJECT_DIR,
        // Not the parent's flags: under tsx they would load tsx into the child too.
        // (BENCH_CHILD_EXEC_ARGV, e.g. "--cpu-prof", is for diagnostics.)
        execArgv: (process.env.BENCH_CHILD_EXEC_ARGV ?? "").split(" ").filter(Boolean),
        stdio: ["ignore", "pipe", "pipe", "ipc"],
        env: { ...process.env, NODE_ENV: "production" }
      })
      const child: Child = { process: proc, done: 0, failures: 0, output: "", result: undefined, exited: false, loaded: false, started: false, seriesDone: false }
      const keep = (chunk: Buffer) => {
        child.output = (child.output + chunk.toString()).slice(-4000)
      }
      proc.stdout?.on("data", keep)
      proc.stderr?.on("data", keep)
      proc.on("message", (message: FromChild) => group.onMessage(child, message))
      proc.on("exit", (code, signal) => {
        child.exited = true
        if (child.result === undefined && group.failure === undefined) {
          group.fail(new Error(`worker process exited (${code ?? signal}) before reporting:\n${child.output}`))
        }
        group.notify()
      })
      group.children.push(child)
    }
    await group.waitFor(() => group.children.every((c) => c.loaded), 60_000, "loading")
    return group
  }

  private onMessage(child: Child, message: FromChild) {
    switch (message.type) {
      case "loaded":
        child.loaded = true
        break
      case "started":
        child.started = true
        break
      case "progress":
        child.done = message.done
        child.failures = message.failures
        break
      case "series-done":
        child.seriesDone = true
        break
      case "result":
        child.result = message.result
        child.done = message.result.seen.length
        break
      case "error":
        this.fail(new Error(`worker process failed: ${message.message}\n${child.output}`))
        break
    }
    this.notify()
  }

  private fail(error: Error) {
    this.failure ??= error
    this.notify()
  }

  private notify() {
    for (const listener of [...this.listeners]) listener()
  }

  /** Resolves when `predicate` holds (checked on every message), rejects on failure or timeout. */
  waitFor(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.failure !== undefined) {
          done()
          reject(this.failure)
        } else if (predicate()) {
          done()
          resolve()
        }
      }
      const timer = setTimeout(() => {
        done()
        reject(new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}`))
      }, timeoutMs)
      const done = () => {
        clearTimeout(timer)
        this.listeners.delete(check)
      }
      this.listeners.add(check)
      check()
    })
  }

  private send(message: ToChild, only?: Child) {
    for (const child of only === undefined ? this.children : [only]) {
      if (!child.exited && child.process.connected) child.process.send(message)
    }
  }

  /** Starts every child's worker at once; resolves when all report started. */
  async go(timeoutMs = 60_000): Promise<void> {
    this.send({ type: "go" })
    await this.waitFor(
      () => this.children.every((c) => c.started),
      timeoutMs,
      "workers to start"
    )
  }

  /** W3 in-process: the (single) child enqueues the series itself. */
  async series(count: number, intervalMs: number, timeoutMs: number): Promise<void> {
    this.send({ type: "series", count, intervalMs }, this.children[0])
    await this.waitFor(() => this.children[0].seriesDone, timeoutMs, "the series")
  }

  get done(): number {
    return this.children.reduce((n, c) => n + c.done, 0)
  }

  get failures(): number {
    return this.children.reduce((n, c) => n + c.failures, 0)
  }

  waitDone(count: number, timeoutMs: number): Promise<void> {
    return this.waitFor(() => this.done >= count, timeoutMs, `${count} jobs (have ${this.done})`)
  }

  /** Stops every worker gracefully and collects the results. */
  async stop(timeoutMs = 60_000): Promise<Array<ChildResult>> {
    this.send({ type: "stop" })
    await this.waitFor(() => this.children.every((c) => c.result !== undefined), timeoutMs, "workers to stop")
    await this.waitFor(() => this.children.every((c) => c.exited), 10_000, "worker processes to exit").catch(() => {
      this.kill()
    })
    return this.children.map((c) => c.result!)
  }

  /** Ends the children (after a failure). */
  kill() {
    for (const child of this.children) {
      if (!child.exited) child.process.kill("SIGKILL")
    }
  }
}
