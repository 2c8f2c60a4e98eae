// `kiln` CLI. Subcommands grow with the packages they compose.
export async function main(argv: string[]): Promise<number> {
  const [command] = argv;
  switch (command) {
    case undefined:
    case "help":
    case "--help":
      console.log("usage: kiln <demo|help>");
      return 0;
    case "demo":
      console.log("kiln demo: nothing composed yet");
      return 0;
    default:
      console.error(`kiln: unknown command "${command}". Run "kiln help".`);
      return 2;
  }
}
