/**
 * `docket grants`: the statements that give a role exactly what Docket's
 * workers, clients and dashboard need on the queue's schema (internal/grants.ts
 * says what, and what not). Prints them; connects to nothing. Run them as the
 * role that owns the schema, after `docket migrate`: docs/operations.md, "A
 * schema of its own".
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Grants from "../../internal/grants.js"
import * as PgSchema from "../../internal/pgSchema.js"
import { usage } from "../errors.js"
import { refuse, schemaName, schemaOption } from "../options.js"

const roleOption = Options.text("role").pipe(
  Options.withPseudoName("<role>"),
  Options.withDescription(
    "The role the workers, clients and dashboard connect as (as PostgreSQL stores it: lower case unless created quoted)."
  ),
  Options.mapEffect((role) =>
    Either.match(Grants.quoteRole(role), {
      onLeft: (reason) => Effect.fail(refuse(`--role: ${reason}`)),
      onRight: Effect.succeed
    })
  )
)

/** The `grants` command. */
export const grants = Command.make("grants", { schema: schemaOption, role: roleOption }, (args) =>
  Effect.gen(function*() {
    // --schema was checked when parsed; DOCKET_SCHEMA is checked here.
    const name = schemaName(args) ?? PgSchema.PUBLIC
    const schema = yield* Either.match(PgSchema.check(name), {
      onLeft: (error) => Effect.fail(usage(`DOCKET_SCHEMA: ${error.reason}`)),
      onRight: (checked) => Effect.succeed(PgSchema.make(checked))
    })
    yield* Console.log(Grants.script(schema, args.role).trimEnd())
  })).pipe(
    Command.withDescription(
      "Prints the GRANT statements a role needs to run workers, clients and the dashboard on the queue's " +
        "PostgreSQL schema (nothing that changes the schema), to run as the schema's owner after docket migrate. " +
        "Connects to nothing."
    )
  )
