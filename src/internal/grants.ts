/**
 * The privileges a role needs to run Docket's workers, clients and dashboard
 * on a schema it does not own (`docket grants`, docs/operations.md, "A schema
 * of its own"): nothing that changes the schema itself, so that role cannot
 * drop or alter a table, and with its own schema not on that role's path.
 *
 * Every object is named: in public a grant ON ALL TABLES would also reach
 * the application's own tables. In another schema, default privileges (set
 * by the owner, who runs these) cover what later migrations add; in public
 * they would again reach every later table of the application, so there the
 * output says to run it again after an upgrade.
 *
 * Not granted because nothing needs it: the identity sequence of
 * docket_items (an INSERT takes the next id under the table's INSERT
 * privilege), DELETE or UPDATE on docket_migrations (a worker starting with
 * migrations on only reads it when nothing is pending: Migrations.ts), TRUNCATE,
 * REFERENCES, TRIGGER, CREATE.
 */
import * as Either from "effect/Either"
import { FUNCTIONS, type PgSchema, RELATIONS } from "./pgSchema.js"

/** Relations read only: the view over waiting and done items, the migrations' bookkeeping. */
const READ_ONLY: ReadonlyArray<string> = ["docket_items_all", "docket_migrations"]

/**
 * A role name quoted exactly as given (PostgreSQL stores a name lower case
 * unless it was created quoted), or why it cannot be one.
 */
export const quoteRole = (role: string): Either.Either<string, string> => {
  if (role.length === 0) return Either.left("must not be empty")
  if (Buffer.byteLength(role) > 63) return Either.left("must be at most 63 bytes (PostgreSQL's longest name)")
  return Either.right(`"${role.replaceAll("\"", "\"\"")}"`)
}

/** The statements, one per line, for `role` (quoted by `quoteRole`) on `schema`. */
export const statements = (schema: PgSchema, quotedRole: string): ReadonlyArray<string> => {
  const writable = RELATIONS.filter((r) => !READ_ONLY.includes(r))
  const list = (names: ReadonlyArray<string>) => names.map(schema.object).join(", ")
  return [
    `GRANT USAGE ON SCHEMA ${schema.quoted} TO ${quotedRole};`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE ${list(writable)} TO ${quotedRole};`,
    `GRANT SELECT ON TABLE ${list(READ_ONLY)} TO ${quotedRole};`,
    `GRANT EXECUTE ON FUNCTION ${list(FUNCTIONS)} TO ${quotedRole};`,
    ...(schema.isPublic ? [] : [
      `ALTER DEFAULT PRIVILEGES IN SCHEMA ${schema.quoted} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${quotedRole};`,
      `ALTER DEFAULT PRIVILEGES IN SCHEMA ${schema.quoted} GRANT EXECUTE ON FUNCTIONS TO ${quotedRole};`
    ])
  ]
}

/** The statements with the comments that say who runs them, and when. */
export const script = (schema: PgSchema, quotedRole: string): string =>
  [
    `-- Docket's privileges for role ${quotedRole} on schema ${schema.quoted} (docket grants).`,
    `-- Run as the role that owns the schema and runs docket migrate, after migrating:`,
    `--   docket grants --schema ${schema.name} --role ... | psql "$OWNER_URL" -v ON_ERROR_STOP=1`,
    ...statements(schema, quotedRole),
    ...(schema.isPublic
      ? [
        `-- public: no default privileges (they would reach the application's later tables too):`,
        `-- run this again after an upgrade whose migrations add a table or a function.`
      ]
      : [])
  ].join("\n") + "\n"
