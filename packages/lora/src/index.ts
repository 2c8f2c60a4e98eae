export const VERSION_PLACEHOLDER = "lora";
