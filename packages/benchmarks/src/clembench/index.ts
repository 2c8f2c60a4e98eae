export const GAME_PLACEHOLDER_clembench = true;
