// What a model API takes as a name: a tool's (every wire sends it), and an agent's (the name a
// run is traced and handed off under). One rule, one wording, for every name the library checks.

/** A name model APIs take: 1 to 64 letters, digits, "_" or "-". */
export const namePattern = /^[A-Za-z0-9_-]{1,64}$/;

/** The rule `namePattern` checks, as the messages of the ConfigErrors that refuse a name say it. */
export const nameRule = '1 to 64 letters, digits, "_" or "-"';
