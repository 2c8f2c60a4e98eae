export const GAME_PLACEHOLDER_tau2 = true;
