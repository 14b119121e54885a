/** The dashboard's constants, in a module of their own so the command's options load without the server (cli/commands/dashboard.ts). */

/** The port `docket dashboard` listens on by default. */
export const DEFAULT_PORT = 4680
/** The shortest token accepted. */
export const MIN_TOKEN_LENGTH = 16
