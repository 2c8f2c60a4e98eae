export const GAME_PLACEHOLDER_questworld = true;
