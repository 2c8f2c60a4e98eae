export const VERSION_PLACEHOLDER = "models";
