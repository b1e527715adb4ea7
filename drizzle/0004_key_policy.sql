ALTER TABLE `api_keys` ADD `models` text;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `budget_micro` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `budget_period` text;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `tokens_per_minute` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `allow_ips` text;--> statement-breakpoint
ALTER TABLE `ledger` ADD `key_id` text;--> statement-breakpoint
CREATE INDEX `ledger_key_time` ON `ledger` (`key_id`,`created_at`);--> statement-breakpoint
ALTER TABLE `request_log` ADD `endpoint` text DEFAULT 'chat' NOT NULL;