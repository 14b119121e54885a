/**
 * `docket dashboard`: serves the web dashboard, its JSON API and /metrics
 * over the queue's database until SIGINT/SIGTERM. Binds to 127.0.0.1 unless
 * --host says otherwise; read-only unless a token is given (--token, else
 * DOCKET_DASHBOARD_TOKEN).
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { DEFAULT_PORT, MIN_TOKEN_LENGTH } from "../../internal/dashboard/constants.js"
import { databaseOption, horizonOptions, horizonThreshold, integerOption, optionalText } from "../options.js"

const portOption = integerOption("port", `The port to listen on (default ${DEFAULT_PORT}; 0 picks a free one).`, {
  min: 0,
  max: 65535
}).pipe(Options.optional)

const hostOption = optionalText(
  "host",
  "host",
  "The address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 exposes it, give a token and put TLS in front)."
)

const basePathOption = optionalText("base-path", "path", "Serve under this path, e.g. /docket (default: at the root).")

const publicOriginOption = optionalText(
  "public-origin",
  "url",
  "The address a reverse proxy serves it at, e.g. https://ops.example.com: forms posted from there may act, " +
    "and that host name is answered to."
)

const tokenOption = optionalText(
  "token",
  "token",
  `The token actions need (at least ${MIN_TOKEN_LENGTH} characters; default $DOCKET_DASHBOARD_TOKEN). ` +
    "Without one the dashboard is read-only."
)

const tokenOf = (option: Option.Option<string>): string | undefined =>
  Option.getOrElse(option, () => {
    const env = process.env.DOCKET_DASHBOARD_TOKEN
    return env !== undefined && env.trim() !== "" ? env.trim() : undefined
  })

/** The command (its serving half is loaded when it runs: dashboardServe.ts). */
export const dashboard = Command.make(
  "dashboard",
  {
    database: databaseOption,
    port: portOption,
    host: hostOption,
    basePath: basePathOption,
    publicOrigin: publicOriginOption,
    token: tokenOption,
    ...horizonOptions
  },
  (args) =>
    Effect.flatMap(
      Effect.promise(() => import("./dashboardServe.js")),
      (m) => m.serve({ ...args, token: tokenOf(args.token), horizon: horizonThreshold(args) })
    )
).pipe(
  Command.withDescription(
    "Serves the web dashboard, its JSON API (/api) and Prometheus metrics (/metrics) over the queue's database " +
      "until SIGINT or SIGTERM; read-only without a token."
  )
)
