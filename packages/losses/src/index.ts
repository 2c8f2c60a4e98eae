export const VERSION_PLACEHOLDER = "losses";
