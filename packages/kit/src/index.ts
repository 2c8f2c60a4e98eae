export const VERSION_PLACEHOLDER = "kit";
