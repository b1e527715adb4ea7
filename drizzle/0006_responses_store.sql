CREATE TABLE `stored_responses` (
	`id` text PRIMARY KEY NOT NULL,
	`owner` text NOT NULL,
	`created_at` integer NOT NULL,
	`items` text NOT NULL,
	`response` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `stored_responses_time` ON `stored_responses` (`created_at`);