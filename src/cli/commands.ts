// Registers the feature commands with the CLI table (each module calls registerCommand).
import "../spendauth/cli";
import "./backup";
import "./jobs";
import "./keys";
import "./usage";
import "./users";
export {};
