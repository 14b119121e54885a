/**
 * migrations/pg/schema.sql and migrations/sqlite/schema.sql are the schema
 * the migrations make (scripts/schema.ts says how they are made): fresh
 * databases are migrated and dumped the same way, and a file that differs
 * fails here, so a migration cannot change the schema without its file.
 */
import { describe, expect, it } from "vitest"
import { readFileSync } from "node:fs"
import { normalisePgDump, PG_ADMIN_URL, pgSchema, SCHEMA_FILES, sqliteSchema } from "../../scripts/schema.js"
import { pgAvailable } from "../support/db.js"

const STALE = (file: string) => `${file} is not the schema the migrations make: run npm run schema (and commit the file)`

describe("the live schema files", () => {
  it("migrations/sqlite/schema.sql is a fresh SQLite file's schema after every migration", async () => {
    expect(await sqliteSchema(), STALE("migrations/sqlite/schema.sql")).toBe(readFileSync(SCHEMA_FILES.sqlite, "utf8"))
  }, 60_000)

  it.skipIf(!pgAvailable)("migrations/pg/schema.sql is a fresh PostgreSQL database's schema after every migration", async () => {
    expect(await pgSchema(PG_ADMIN_URL), STALE("migrations/pg/schema.sql")).toBe(readFileSync(SCHEMA_FILES.pg, "utf8"))
  }, 120_000)

  it("what varies by run or version is left out of pg_dump's output", () => {
    const dump = [
      "--",
      "-- PostgreSQL database dump",
      "--",
      "",
      "\\restrict AbC123",
      "",
      "-- Dumped from database version 15.20",
      "-- Dumped by pg_dump version 15.20",
      "",
      "SET statement_timeout = 0;",
      "SELECT pg_catalog.set_config('search_path', '', false);",
      "",
      "--",
      "-- Name: t; Type: TABLE; Schema: public; Owner: -",
      "--",
      "",
      "CREATE TABLE public.t (id bigint);",
      "",
      "",
      "",
      "--",
      "-- PostgreSQL database dump complete",
      "--",
      "",
      "\\unrestrict AbC123",
      ""
    ].join("\n")
    expect(normalisePgDump(dump)).toBe("--\n-- Name: t; Type: TABLE; Schema: public; Owner: -\n--\n\nCREATE TABLE public.t (id bigint);\n")
  })
})
