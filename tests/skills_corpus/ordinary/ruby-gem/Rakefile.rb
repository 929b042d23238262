task :test do
  sh 'bundle exec rspec'
end
