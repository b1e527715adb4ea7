CREATE TABLE `triage_alerts` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`call_id` integer,
	`job_id` integer NOT NULL,
	`path` text NOT NULL,
	`kind` text NOT NULL,
	`status` text NOT NULL,
	`group_key` text,
	`dedupe_key` text,
	`title` text NOT NULL,
	`severity` text,
	`details` text DEFAULT '' NOT NULL,
	`alert_count` integer DEFAULT 0 NOT NULL,
	`state` text NOT NULL,
	`summary` text,
	`summary_error` text,
	`refers_to` integer,
	`digest_id` integer,
	`created_at` integer NOT NULL,
	`due_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `triage_alerts_call_id_unique` ON `triage_alerts` (`call_id`);--> statement-breakpoint
CREATE INDEX `triage_alerts_group` ON `triage_alerts` (`job_id`,`group_key`,`id`);--> statement-breakpoint
CREATE INDEX `triage_alerts_path_time` ON `triage_alerts` (`path`,`created_at`);--> statement-breakpoint
CREATE TABLE `triage_deliveries` (
	`alert_id` integer NOT NULL,
	`target` integer NOT NULL,
	`kind` text NOT NULL,
	`state` text DEFAULT 'pending' NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer NOT NULL,
	`last_error` text,
	`sent_at` integer,
	`remote_id` text,
	PRIMARY KEY(`alert_id`, `target`)
);
--> statement-breakpoint
CREATE INDEX `triage_deliveries_due` ON `triage_deliveries` (`state`,`next_attempt_at`);