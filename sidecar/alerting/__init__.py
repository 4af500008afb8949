"""alerting"""
