export const VERSION_PLACEHOLDER = "tensor";
