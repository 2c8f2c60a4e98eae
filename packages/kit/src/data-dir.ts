// The embedded stories260K model ships in @kiln/models (data/stories260K), so a user who wants it needs only that
// package; kit re-exports the locator the demo uses.
export { stories260KPaths } from "@kiln/models";
