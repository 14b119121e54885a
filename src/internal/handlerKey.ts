/**
 * The service key of a kind's handler (`Handler.tag`): one place for the
 * prefix that `Handler.layer` writes and the worker pool looks for.
 */

/** The service key prefix of a kind's handler. */
export const HANDLER_KEY_PREFIX = "docket/Handler/"
