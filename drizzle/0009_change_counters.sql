CREATE TABLE `change_counters` (
	`name` text PRIMARY KEY NOT NULL,
	`version` integer NOT NULL
);
