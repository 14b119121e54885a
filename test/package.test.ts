/**
 * The package as a user gets it: `npm pack` (its prepack builds dist/), then
 * `npm install <tarball>` into a fresh project outside this repository, with
 * the Effect peers at the versions this repository is tested with, TypeScript
 * and @types/node. There the README's example is built by the project's own
 * tsc with the tsconfig `tsc --init` writes, unedited (module nodenext,
 * declaration: true, so every public type must be nameable from a subpath the
 * package exports), and run with plain node; a CommonJS file `require()`s the
 * package (Node 20.19+, 22.12+ load ES modules from require); the installed
 * `docket` command runs: --version, and a worker over examples/tasks (tsx is
 * loaded only for the TypeScript ones).
 *
 * The install compiles better-sqlite3 from source here (60-90 s, more on a
 * busy machine), hence the long set-up. DOCKET_PACKAGE_TARBALL names a tarball
 * `npm pack` made already (scripts/ci-node-lines.sh packs once for every Node
 * line). Nothing here is skipped, in CI or not.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { promisify } from "node:util"
import { ROOT, runNode } from "./support/cli.js"

const run = promisify(execFile)
const manifest = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"))
const installedVersion = (name: string): string =>
  JSON.parse(readFileSync(join(ROOT, "node_modules", name, "package.json"), "utf8")).version

// The Effect packages this repository runs with (the peers and the peers'
// own peers), at the exact versions installed here: the tested set.
const effectFamily = Object.keys(manifest.devDependencies as Record<string, string>)
  .filter((name) => (name === "effect" || name.startsWith("@effect/")) && name !== "@effect/vitest")

const work = mkdtempSync(join(tmpdir(), "docket-package-"))
const project = join(work, "project")
let tarball = ""
let installed = ""
let bin = ""

/** A command of the installed package, run with plain node from the project. */
const docket = (args: ReadonlyArray<string>) => runNode([bin, ...args], { cwd: project })

/** A long-running node process in the project; `stop` sends SIGTERM and waits for its exit. */
const startNode = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const childEnv: Record<string, string | undefined> = { ...process.env, ...env }
  delete childEnv.DOCKET_DATABASE_URL
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd: project,
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d))
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d))
  const exited = new Promise<number | null>((done) => child.on("close", (code) => done(code)))
  return {
    output: () => ({ stdout, stderr }),
    // Resolves when the output shows `pattern` (checked on each chunk, not polled); fails on exit or timeout.
    waitFor: (pattern: RegExp, timeoutMs = 60_000) =>
      new Promise<void>((resolve, reject) => {
        const fail = () => {
          cleanup()
          child.kill("SIGKILL")
          reject(new Error(`no ${pattern} from node ${args.join(" ")}:\n${stdout}\n${stderr}`))
        }
        const check = () => {
          if (!pattern.test(stdout)) return
          cleanup()
          resolve()
        }
        const timer = setTimeout(fail, timeoutMs)
        const cleanup = () => {
          clearTimeout(timer)
          child.stdout!.off("data", check)
          child.off("close", fail)
        }
        child.stdout!.on("data", check)
        child.on("close", fail)
        check()
      }),
    stop: async () => {
      child.kill("SIGTERM")
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000)
      const code = await exited
      clearTimeout(timer)
      return code
    }
  }
}

/** The module specifiers a .d.ts imports (comments removed first: doc comments show imports too). */
const imports = (text: string) =>
  [...text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "")
    .matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)["']([^"']+)["']/g)].map((m) => m[1])

beforeAll(async () => {
  const packed = process.env.DOCKET_PACKAGE_TARBALL
  if (packed !== undefined && packed !== "") tarball = resolve(packed)
  else {
    await run("npm", ["pack", "--pack-destination", work, "--silent"], { cwd: ROOT, timeout: 120_000 })
    tarball = join(work, readdirSync(work).find((f) => f.endsWith(".tgz"))!)
  }

  mkdirSync(project)
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "docket-user", private: true, type: "module" }))
  // The tsconfig a new user has: what `tsc --init` writes, unedited.
  const tsc = join(ROOT, "node_modules", "typescript", "bin", "tsc")
  await run(process.execPath, [tsc, "--init"], { cwd: project })

  const specs = [...effectFamily, "typescript", "@types/node"].map((name) => `${name}@${installedVersion(name)}`)
  await run("npm", ["install", tarball, ...specs, "--prefer-offline", "--no-audit", "--no-fund"], {
    cwd: project,
    timeout: 300_000,
    maxBuffer: 16 * 1024 * 1024
  })
  installed = join(project, "node_modules", "docket")
  bin = join(project, "node_modules", ".bin", "docket")
}, 420_000)

afterAll(() => rmSync(work, { recursive: true, force: true }))

describe("the package, installed into a new project", () => {
  it("ships dist, migrations, bin, README and LICENSE only", async () => {
    const { stdout } = await run("tar", ["-tzf", tarball])
    const files = stdout.split("\n").filter((f) => f !== "").map((f) => f.replace(/^package\//, ""))
    const outside = files.filter((f) => !/^(dist|migrations|bin)\//.test(f) && !["README.md", "LICENSE", "package.json"].includes(f))
    expect(outside).toEqual([])
    for (const file of ["dist/index.js", "dist/index.d.ts", "dist/index.js.map", "dist/cli/main.js", "bin/docket.mjs", "migrations/sqlite/0001_items.sql", "migrations/pg/0001_items.sql", "LICENSE"]) {
      expect(files).toContain(file)
    }
  })

  it("installs with its peers satisfied, and its public types name only Effect's packages", async () => {
    // npm ls exits non-zero on a missing or invalid peer.
    await run("npm", ["ls", "--all"], { cwd: project, maxBuffer: 16 * 1024 * 1024 })
    const seen = new Set<string>()
    const bare = new Set<string>()
    const walk = (file: string) => {
      if (seen.has(file)) return
      seen.add(file)
      for (const specifier of imports(readFileSync(file, "utf8"))) {
        if (specifier.startsWith(".")) walk(resolve(dirname(file), specifier.replace(/\.js$/, ".d.ts")))
        else bare.add(specifier.replace(/^((@[^/]+\/)?[^/]+).*$/, "$1"))
      }
    }
    walk(join(installed, "dist", "index.d.ts"))
    expect(seen.size).toBeGreaterThan(5)
    for (const name of bare) expect(Object.keys(manifest.peerDependencies)).toContain(name)
    expect([...bare]).not.toContain("pg")
    expect([...bare]).not.toContain("better-sqlite3")
  })

  it("type-checks the README's example with the project's tsc and runs it with plain node", async () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8")
    const example = /```ts\n([\s\S]*?)```/.exec(readme)![1]
    expect(example).toContain(`from "docket"`)
    writeFileSync(join(project, "example.ts"), example)
    cpSync(join(ROOT, "test", "fixtures", "package", "library.ts"), join(project, "library.ts"))
    const checked = await run(join(project, "node_modules", ".bin", "tsc"), ["-p", "."], { cwd: project }).catch(
      (error: { stdout: string }) => {
        throw new Error(`tsc failed on the README's example or the library module:\n${error.stdout}`)
      }
    )
    expect(checked.stdout).toBe("")
    // declaration: true (tsc --init's default): the inferred types were named
    // from the package's own subpaths, never from a path inside it (TS2742).
    const declared = imports(readFileSync(join(project, "library.d.ts"), "utf8"))
    expect(declared).toContain("docket")
    for (const specifier of declared) expect(specifier).toMatch(/^(docket(\/[A-Z][A-Za-z]+)?|effect(\/[A-Za-z]+)?|@effect\/[a-z-]+(\/[A-Za-z]+)?)$/)
    expect(existsSync(join(project, "example.d.ts"))).toBe(true)
    const library = await runNode(["--input-type=module", "-e", `const m = await import("./library.js"); console.log(Object.keys(m).length)`], { cwd: project })
    expect(library.code, library.stderr).toBe(0)
    expect(Number(library.stdout.trim())).toBeGreaterThan(10)
    // The example runs until it is stopped (Effect.never): it is stopped once its item ran.
    const app = startNode(["example.js"])
    await app.waitFor(/sending to ada@example\.com, attempt 1/)
    expect(await app.stop(), app.output().stderr).toBe(0)
    expect(existsSync(join(project, "docket.db"))).toBe(true)
    const stats = await docket(["stats", "--json", "--database", "docket.db"])
    expect(stats.code, stats.stderr).toBe(0)
    expect(JSON.parse(stats.stdout)).toMatchObject({ due: 0, scheduled: 0, running: 0, dead: 0 })
  })

  it("loads with require() from CommonJS, and refuses paths it does not export", async () => {
    // Node 20.19+ and 22.12+ load an ES module from require() (the engines
    // range starts there); the package's exports carry a "default" condition
    // so that require resolves them. Effect comes through require too (its
    // CommonJS build): Docket's layers run on it all the same.
    writeFileSync(
      join(project, "enqueue.cjs"),
      `const { Effect, Schema } = require("effect")\n` +
        `const { Docket, Handler } = require("docket")\n` +
        `const { InvalidInput } = require("docket/Errors")\n` +
        `const Ping = Handler.make("cjs.ping", { payload: Schema.Struct({ n: Schema.Number }), run: () => Effect.void })\n` +
        `const enqueue = (n) => Docket.client(Ping).enqueue({ n }).pipe(Effect.provide(Docket.layerClient("cjs.db")))\n` +
        `Effect.runPromise(enqueue(1)).then(async (r) => {\n` +
        `  const bad = await Effect.runPromise(Effect.flip(enqueue("one")))\n` +
        `  console.log(JSON.stringify({ id: r.id, bad: bad instanceof InvalidInput, field: bad.field }))\n` +
        `})\n`
    )
    const r = await runNode(["enqueue.cjs"], { cwd: project })
    expect(r.code, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout.trim().split("\n").pop()!)).toEqual({ id: 1, bad: true, field: "payload" })
    const stats = await docket(["stats", "--json", "--database", "cjs.db"])
    expect(JSON.parse(stats.stdout)).toMatchObject({ due: 1 })
    const internal = await runNode(["-e", `require("docket/dist/internal/validate.js")`], { cwd: project })
    expect(internal.code).not.toBe(0)
    expect(internal.stderr).toContain("ERR_PACKAGE_PATH_NOT_EXPORTED")
  })

  it("runs `docket --version` from the install", async () => {
    const r = await docket(["--version"])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout.trim()).toBe(manifest.version)
  })

  it("runs `enqueue` and `stats` from their bundle (dist/hot/): no module of the installed Effect is loaded; other commands load it", async () => {
    // Every ES module the process resolves is written to a file by a resolve
    // hook: node's module.registerHooks where it has it (22.15 and later:
    // module.register is deprecated from 26), else module.register (20). The
    // bundle's own files are in dist/hot/.
    const hooks = join(work, "hooks.mjs")
    const register = join(work, "register.mjs")
    writeFileSync(
      hooks,
      `import { appendFileSync } from "node:fs"\n` +
        `export async function resolve(specifier, context, next) {\n` +
        `  const r = await next(specifier, context)\n` +
        `  appendFileSync(process.env.MODULE_LOG, r.url + "\\n")\n` +
        `  return r\n` +
        `}\n`
    )
    writeFileSync(
      register,
      `import * as Module from "node:module"\n` +
        `import { appendFileSync } from "node:fs"\n` +
        `if (typeof Module.registerHooks === "function") {\n` +
        `  Module.registerHooks({ resolve(specifier, context, next) {\n` +
        `    const r = next(specifier, context)\n` +
        `    appendFileSync(process.env.MODULE_LOG, r.url + "\\n")\n` +
        `    return r\n` +
        `  } })\n` +
        `} else Module.register(${JSON.stringify(`file://${hooks}`)})\n`
    )
    const loaded = async (args: ReadonlyArray<string>) => {
      const log = join(work, `modules-${args[0]}.log`)
      rmSync(log, { force: true })
      const r = await runNode(["--import", register, bin, ...args, "--database", "hot.db"], { cwd: project, env: { MODULE_LOG: log } })
      expect(r.code, r.stderr).toBe(0)
      const urls = readFileSync(log, "utf8").trim().split("\n")
      return {
        stdout: r.stdout,
        effect: urls.filter((u) => u.includes("/node_modules/effect/")).length,
        bundle: urls.filter((u) => u.includes("/docket/dist/hot/")).length
      }
    }
    expect((await docket(["migrate", "--database", "hot.db"])).code).toBe(0)
    const enqueue = await loaded(["enqueue", "hot.ping", '{"n":1}'])
    expect(enqueue.stdout.trim()).toBe("1")
    expect(enqueue).toMatchObject({ effect: 0 })
    expect(enqueue.bundle).toBeGreaterThan(2)
    const stats = await loaded(["stats", "--json"])
    expect(JSON.parse(stats.stdout)).toMatchObject({ due: 1 })
    expect(stats).toMatchObject({ effect: 0 })
    const workers = await loaded(["workers"])
    expect(workers.effect).toBeGreaterThan(100)
    expect(workers.bundle).toBe(0)
    expect(readFileSync(join(installed, "dist", "hot", "THIRD-PARTY-NOTICES.md"), "utf8")).toContain("## effect ")
  })

  it("serves the dashboard's throughput chart from uPlot's files bundled at build (no CDN, no uplot package installed)", async () => {
    // Not a dependency: the files come from dist/vendor/uplot/.
    expect(existsSync(join(project, "node_modules", "uplot"))).toBe(false)
    expect(JSON.parse(readFileSync(join(installed, "dist", "vendor", "uplot", "version.json"), "utf8"))).toMatchObject({ name: "uplot" })
    expect(existsSync(join(installed, "dist", "vendor", "uplot", "LICENSE"))).toBe(true)
    expect((await docket(["migrate", "--database", "dash.db"])).code).toBe(0)
    const dashboard = startNode([join(installed, "bin", "docket.mjs"), "dashboard", "--database", "dash.db", "--port", "0"])
    try {
      await dashboard.waitFor(/listening on http:\/\/[^\s]+\//)
      const root = /listening on (http:\/\/[^\s]+?)\/ /.exec(dashboard.output().stdout)![1]
      const overview = await (await fetch(`${root}/`)).text()
      const uplot = /<script src="(\/assets\/uplot-[\d.]+\.min\.js)"/.exec(overview)
      expect(uplot, overview).not.toBeNull()
      for (const path of [uplot![1], uplot![1].replace(/\.js$/, ".css"), "/assets/chart-2.js"]) {
        const response = await fetch(`${root}${path}`)
        expect(response.status, path).toBe(200)
        expect((await response.text()).length, path).toBeGreaterThan(100)
      }
    } finally {
      expect(await dashboard.stop()).toBe(0)
    }
  })

  it("works without @effect/workflow (an optional peer): only the workflow parts say what to install", async () => {
    // The project's copy set aside: what a user who never installed it has.
    const present = join(project, "node_modules", "@effect", "workflow")
    const away = `${present}.away`
    renameSync(present, away)
    try {
      expect((await docket(["migrate", "--database", "nowf.db"])).code).toBe(0)
      expect((await docket(["enqueue", "greet", '{"name":"Ada"}', "--database", "nowf.db"])).code).toBe(0)
      const stats = await docket(["stats", "--json", "--database", "nowf.db"])
      expect(stats.code, stats.stderr).toBe(0)
      expect(JSON.parse(stats.stdout)).toMatchObject({ due: 1 })
      const listed = await docket(["workflow", "list", "--database", "nowf.db"])
      expect(listed.code).toBe(1)
      expect(listed.stderr.trim()).toBe("docket: docket workflow needs @effect/workflow (npm install @effect/workflow)")
      // The library's main entry loads; its workflow entry names what is missing.
      writeFileSync(
        join(project, "nowf.mjs"),
        `import { Docket } from "docket"\n` +
          `console.log(typeof Docket.layer)\n` +
          `await import("docket/Workflows").then(() => console.log("loaded"), (e) => console.log(String(e)))\n`
      )
      const loaded = await runNode(["nowf.mjs"], { cwd: project })
      expect(loaded.code, loaded.stderr).toBe(0)
      const [layerType, workflows] = loaded.stdout.trim().split("\n")
      expect(layerType).toBe("function")
      expect(workflows).toMatch(/Cannot find (package|module) '@effect\/workflow/)
      // The dashboard serves every page; the workflow API answers 501 saying why.
      const dashboard = startNode([join(installed, "bin", "docket.mjs"), "dashboard", "--database", "nowf.db", "--port", "0"])
      try {
        await dashboard.waitFor(/listening on http:\/\/[^\s]+\//)
        const root = /listening on (http:\/\/[^\s]+?)\/ /.exec(dashboard.output().stdout)![1]
        expect((await fetch(`${root}/`)).status).toBe(200)
        const api = await fetch(`${root}/api/workflows`)
        expect(api.status).toBe(501)
        expect(await api.text()).toContain("workflows need @effect/workflow installed")
      } finally {
        expect(await dashboard.stop()).toBe(0)
      }
    } finally {
      renameSync(away, present)
    }
  })

  it("runs a worker over task files with the compiled command, loading tsx only for TypeScript ones", async () => {
    // A load hook that notes every tsx module the process imports.
    const trace = join(work, "tsx-trace.txt")
    writeFileSync(
      join(project, "trace-hooks.mjs"),
      `import { appendFileSync } from "node:fs"\n` +
        `export async function load(url, context, next) {\n` +
        `  if (url.includes("/node_modules/tsx/")) appendFileSync(process.env.TSX_TRACE, url + "\\n")\n` +
        `  return next(url, context)\n}\n`
    )
    writeFileSync(
      join(project, "trace.mjs"),
      `import { register } from "node:module"\nregister("./trace-hooks.mjs", import.meta.url)\n`
    )
    const worker = (tasks: string, db: string, until: RegExp) => async () => {
      writeFileSync(trace, "")
      const w = startNode(
        ["--import", "./trace.mjs", join(installed, "bin", "docket.mjs"), "worker", "--tasks", tasks, "--database", db, "--log-items"],
        { TSX_TRACE: trace }
      )
      await w.waitFor(until)
      expect(await w.stop(), w.output().stderr).toBe(0)
      return readFileSync(trace, "utf8")
    }

    // JavaScript tasks only: tsx is never loaded.
    mkdirSync(join(project, "js-tasks"))
    cpSync(join(ROOT, "examples", "tasks", "thumbnail.render.js"), join(project, "js-tasks", "thumbnail.render.js"))
    expect((await docket(["enqueue", "thumbnail.render", '{"image":"cat.png","width":200}', "--database", "js.db"])).code).toBe(0)
    expect(await worker("js-tasks", "js.db", /done thumbnail\.render #1/)()).toBe("")

    // examples/tasks, a .ts handler among them (it imports "docket": the installed package, one Effect).
    cpSync(join(ROOT, "examples", "tasks"), join(project, "tasks"), { recursive: true })
    const migrated = await docket(["migrate", "--database", "ts.db"])
    expect(migrated.stdout).toContain("applied migrations 1, 2, 3, 4, 5")
    expect((await docket(["enqueue", "greet", '{"name":"Ada"}', "--database", "ts.db"])).stdout.trim()).toBe("1")
    expect(await worker("tasks", "ts.db", /done greet #1/)()).toContain("/node_modules/tsx/")
    const stats = await docket(["stats", "--json", "--database", "ts.db"])
    expect(JSON.parse(stats.stdout)).toMatchObject({ due: 0, scheduled: 0, running: 0, dead: 0 })
  })
})
