/** A variable name as templates read it (`{{ vars.NAME }}`); on its own, so that code that only checks a name loads no schema library. */
export const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
