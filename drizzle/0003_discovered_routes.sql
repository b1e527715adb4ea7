CREATE TABLE `discovered_routes` (
	`upstream` text NOT NULL,
	`model` text NOT NULL,
	`position` integer NOT NULL,
	`seen_at` integer NOT NULL,
	PRIMARY KEY(`upstream`, `model`)
);
