// Registers the feature commands with the CLI table (each module calls registerCommand).
import "../spendauth/cli";
import "./backup";
import "./jobs";
import "./keys";
import "./reload";
import "./usage";
import "./users";
export {};
