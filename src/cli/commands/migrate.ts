/** `docket migrate`: creates or updates Docket's tables. */
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Database from "../../Database.js"
import * as Migrations from "../../Migrations.js"
import { pluralWord } from "../format.js"
import { databaseOption, databaseOptions, databaseUrl, schemaName } from "../options.js"
import { describeDatabase } from "../queue.js"

/** The `migrate` command: prints the migrations it applied, or that the schema is up to date. */
export const migrate = Command.make("migrate", { database: databaseOption }, ({ database }) =>
  Effect.gen(function*() {
    const url = databaseUrl(database)
    const applied = yield* Migrations.run.pipe(
      Effect.provide(Database.layer(url, { ...databaseOptions(database), migrate: false }))
    )
    const where = describeDatabase(url, schemaName(database))
    yield* Console.log(
      applied.length === 0
        ? `${where}: the schema is up to date`
        : `${where}: applied ${pluralWord(applied.length, "migration")} ${applied.join(", ")}`
    )
  })).pipe(Command.withDescription("Creates or updates Docket's tables in the database (safe to run at any time)."))
