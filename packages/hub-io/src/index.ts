export const VERSION_PLACEHOLDER = "hub-io";
