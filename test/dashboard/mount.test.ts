/**
 * The dashboard mounted into an application's own HttpServer, as
 * docs/dashboard.md shows it: `Dashboard.router` concatenated with the
 * application's router, under a base path, on one server. The application's
 * routes answer as before; the dashboard's pages, API, metrics and assets
 * answer under the base path; what neither routes is the dashboard's 404
 * only under its base path.
 */
import { HttpRouter, HttpServer, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import { createServer } from "node:http"
import { afterAll, describe, expect, it } from "vitest"
import { Dashboard, QueueRepo } from "../../src/index.js"
import { cliBackends } from "../support/cli.js"
import { get, parseMetrics } from "../support/dashboard.js"
import { repoLayer } from "../support/db.js"

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

describe.each(cliBackends(cleanups))("the dashboard mounted into an application's server on $name", (backend) => {
  it.skipIf(backend.skip)("serves the application's routes and the dashboard's under its base path, side by side", async () => {
    const url = await backend.fresh()
    const app = HttpRouter.empty.pipe(
      HttpRouter.get("/health", HttpServerResponse.text("ok")),
      HttpRouter.get("/docket-is-not-here", HttpServerResponse.text("the application's"))
    )
    const routes = HttpRouter.concat(app, Dashboard.router({ basePath: "/ops/docket" }))
    const layer = HttpServer.serve(routes).pipe(
      Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
      Layer.provideMerge(repoLayer(url))
    )
    const runtime = ManagedRuntime.make(layer)
    cleanups.push(() => runtime.dispose())
    const address = await runtime.runPromise(Effect.map(HttpServer.HttpServer, (s) => s.address))
    if (address._tag !== "TcpAddress") throw new Error("not a TCP address")
    const root = `http://127.0.0.1:${address.port}`
    const { id } = await runtime.runPromise(Effect.flatMap(QueueRepo.QueueRepo, (r) => r.enqueue("mounted.kind", { n: 1 })))

    // The application's own routes, untouched.
    const health = await get(`${root}/health`)
    expect([health.status, await health.text()]).toEqual([200, "ok"])
    expect(await (await get(`${root}/docket-is-not-here`)).text()).toBe("the application's")
    // The dashboard's, under its base path: pages with links under it, the API, metrics, assets.
    const overview = await get(`${root}/ops/docket/`)
    expect(overview.status).toBe(200)
    const page = await overview.text()
    expect(page).toContain(`href="/ops/docket/items"`)
    expect(page).toMatch(/<script src="\/ops\/docket\/assets\/[\w.-]+\.js"/)
    const item = await get(`${root}/ops/docket/api/items/${id}`)
    expect(item.status).toBe(200)
    expect(await item.json()).toMatchObject({ id, kind: "mounted.kind", state: "waiting" })
    const metrics = parseMetrics(await (await get(`${root}/ops/docket/metrics`)).text())
    expect(metrics.get(`docket_items{kind="mounted.kind",state="waiting"}`)).toBe(1)
    const css = await get(`${root}/ops/docket/assets/${/assets\/([\w.-]+\.css)/.exec(page)![1]}`)
    expect(css.status).toBe(200)
    // Read-only without a token, mounted too.
    expect((await fetch(`${root}/ops/docket/api/items/${id}/cancel`, { method: "POST" })).status).toBe(403)
    // Unknown paths: under the base path the dashboard's 404; elsewhere not the dashboard's.
    const missing = await get(`${root}/ops/docket/nothing-here`)
    expect(missing.status).toBe(404)
    expect(await missing.text()).toContain("No such page.")
    const outside = await get(`${root}/nothing-here`)
    expect(outside.status).toBe(404)
    expect(await outside.text()).not.toContain("No such page.")
  })
})
